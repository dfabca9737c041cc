package modal

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/canvasapp/companion/core"
	modalsdk "github.com/modal-labs/modal-client/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// found is what the control plane says of one of our sandboxes.
type found struct {
	sb      *modalsdk.Sandbox
	tags    map[string]string
	running bool
	exit    *int
}

// inspect reads sandbox id's tags and status: two control-plane calls
// (SandboxTagsGet, SandboxWait with timeout 0); nothing reaches the box.
// A sandbox of another account, or not companion's, is not found.
func (p *Provider) inspect(ctx context.Context, c *client, acct core.Account, id string) (found, error) {
	if !validID(id) {
		return found{}, notFound(id)
	}
	sb, err := c.sdk.Sandboxes.FromID(ctx, id, nil)
	if err != nil {
		return found{}, wrap(err, "get", id, c.secret)
	}
	tags, err := sb.GetTags(ctx, nil)
	if err != nil {
		return found{}, wrap(err, "get", id, c.secret)
	}
	if tags[TagAccount] != acct.ID || tags[core.LabelWorkspace] == "" {
		return found{}, notFound(id)
	}
	code, err := sb.Poll(ctx, nil)
	if err != nil {
		return found{}, wrap(err, "get", id, c.secret)
	}
	return found{sb: sb, tags: tags, running: code == nil, exit: code}, nil
}

// box is f as a core.Box. A terminated sandbox is paused while its
// snapshot lives (snapLive), deleted otherwise.
func (p *Provider) box(c *client, f found, snapLive bool) core.Box {
	b := core.Box{ID: f.sb.SandboxID, Name: f.tags[TagName], Labels: map[string]string{core.LabelWorkspace: f.tags[core.LabelWorkspace]}}
	if o := f.tags[core.LabelOwner]; o != "" {
		b.Labels[core.LabelOwner] = o
	}
	if n := f.tags[TagKeyNonce]; n != "" {
		b.Key = agentKey(c.secret, n)
	}
	if t, err := time.Parse(time.RFC3339, f.tags[TagCreatedAt]); err == nil {
		b.CreatedAt = t
	}
	switch {
	case f.running:
		b.State = core.StateRunning
	case snapLive:
		b.State = core.StatePaused
		if t, err := time.Parse(time.RFC3339, f.tags[TagPausedAt]); err == nil {
			b.PausedAt = t
		}
		b.Key = "" // nothing answers with it
	default:
		b.State, b.Key, b.ExitCode = core.StateDeleted, "", f.exit
	}
	return b
}

// snapshotLive reports whether f's snapshot image still exists.
func (p *Provider) snapshotLive(ctx context.Context, c *client, f found) (bool, error) {
	snap := f.tags[TagSnapshot]
	if snap == "" {
		return false, nil
	}
	_, err := c.sdk.Images.FromID(ctx, snap, nil)
	var nf modalsdk.NotFoundError
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, wrap(err, "get snapshot of", f.sb.SandboxID, c.secret)
	}
	return true, nil
}

// Get implements core.Provider.
func (p *Provider) Get(ctx context.Context, acct core.Account, id string) (b core.Box, err error) {
	defer func(t time.Time) { p.observe("get", t, err) }(time.Now())
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := p.clientFor(ctx, acct)
	if err != nil {
		return core.Box{}, err
	}
	return p.get(ctx, c, acct, id)
}

func (p *Provider) get(ctx context.Context, c *client, acct core.Account, id string) (core.Box, error) {
	f, err := p.inspect(ctx, c, acct, id)
	if err != nil {
		return core.Box{}, err
	}
	live := false
	if !f.running {
		if live, err = p.snapshotLive(ctx, c, f); err != nil {
			return core.Box{}, err
		}
	}
	b := p.box(c, f, live)
	p.withURL(ctx, c, &b, f.sb)
	return b, nil
}

// List implements core.Provider: this account's running sandboxes
// (SandboxList, filtered by the account tag). Paused boxes are terminated
// sandboxes, which Modal's list leaves out; core reads them with Get.
func (p *Provider) List(ctx context.Context, acct core.Account) (out []core.Box, err error) {
	defer func(t time.Time) { p.observe("list", t, err) }(time.Now())
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := p.clientFor(ctx, acct)
	if err != nil {
		return nil, err
	}
	return p.list(ctx, c, acct, nil)
}

func (p *Provider) list(ctx context.Context, c *client, acct core.Account, extra map[string]string) ([]core.Box, error) {
	tags := map[string]string{TagAccount: acct.ID}
	maps.Copy(tags, extra)
	seq, err := c.sdk.Sandboxes.List(ctx, &modalsdk.SandboxListParams{Tags: tags, Environment: acct.Config[ConfigEnvironment]})
	if err != nil {
		return nil, wrap(err, "list", "", c.secret)
	}
	out := []core.Box{}
	seen := map[string]bool{}
	for sb, err := range seq {
		if err != nil {
			return nil, wrap(err, "list", "", c.secret)
		}
		if seen[sb.SandboxID] || len(out) > 10000 {
			continue // a server that repeats itself must not loop us
		}
		seen[sb.SandboxID] = true
		if !validID(sb.SandboxID) {
			continue
		}
		// Listed means running (the SDK lists unfinished sandboxes only),
		// so only the tags are read: the list's own tags are not passed on
		// by the SDK.
		tags, err := sb.GetTags(ctx, nil)
		var nf modalsdk.NotFoundError
		if errors.As(err, &nf) || status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return nil, wrap(err, "list", sb.SandboxID, c.secret)
		}
		if tags[TagAccount] != acct.ID || tags[core.LabelWorkspace] == "" {
			continue
		}
		f := found{sb: sb, tags: tags, running: true}
		b := p.box(c, f, false)
		p.withURL(ctx, c, &b, f.sb)
		out = append(out, b)
	}
	return out, nil
}

// Create implements core.Provider. A sandbox already running for the
// workspace is returned instead of a second one.
func (p *Provider) Create(ctx context.Context, acct core.Account, spec core.CreateSpec) (b core.Box, err error) {
	defer func(t time.Time) { p.observe("create", t, err) }(time.Now())
	// The first create from an image builds it at Modal, which can take
	// minutes; a create cut short is retried and joins the same build.
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	c, err := p.clientFor(ctx, acct)
	if err != nil {
		return core.Box{}, err
	}
	if spec.WorkspaceID == "" {
		return core.Box{}, core.Errorf(core.KindInvalid, "modal create: no workspace id")
	}
	have, err := p.list(ctx, c, acct, map[string]string{core.LabelWorkspace: spec.WorkspaceID})
	if err != nil {
		return core.Box{}, err
	}
	if len(have) > 0 {
		return have[0], nil
	}
	image := acct.Config[ConfigImage]
	if o := spec.Options[OptionImage]; o != "" {
		image = o
	}
	if image == "" {
		image = DefaultImage
	}
	tags := map[string]string{TagAccount: acct.ID, core.LabelWorkspace: spec.WorkspaceID, TagName: spec.Name}
	if spec.Owner != "" {
		tags[core.LabelOwner] = spec.Owner
	}
	if memoryEnabled(acct) {
		tags[TagMemory] = "1"
	}
	if spec.Progress != nil {
		spec.Progress("creating a Modal sandbox from " + image + " (Modal builds the image on its first use)")
	}
	return p.start(ctx, c, acct, c.sdk.Images.FromRegistry(image, nil), tags, spec.Lifecycle.IdlePauseAfter)
}

// start creates a sandbox from img with tags and a fresh key nonce.
func (p *Provider) start(ctx context.Context, c *client, acct core.Account, img *modalsdk.Image, tags map[string]string, idle time.Duration) (core.Box, error) {
	var err error
	if idle <= 0 {
		if idle, err = durationSetting(acct, ConfigIdleTimeout, DefaultIdleTimeout); err != nil {
			return core.Box{}, err
		}
	}
	appName := acct.Config[ConfigApp]
	if appName == "" {
		appName = DefaultApp
	}
	app, err := c.sdk.Apps.FromName(ctx, appName, &modalsdk.AppFromNameParams{CreateIfMissing: true, Environment: acct.Config[ConfigEnvironment]})
	if err != nil {
		return core.Box{}, wrap(err, "find app "+appName+" for", "", c.secret)
	}
	tags = maps.Clone(tags)
	nonce := newNonce()
	tags[TagKeyNonce] = nonce
	tags[TagCreatedAt] = time.Now().UTC().Format(time.RFC3339)
	key := agentKey(c.secret, nonce)
	sb, err := c.sdk.Sandboxes.Create(ctx, app, img, &modalsdk.SandboxCreateParams{
		Timeout:        Lifetime,
		IdleTimeout:    idle, // native first: Modal ends an idle sandbox itself
		EncryptedPorts: []int{agentPort},
		Env:            map[string]string{keyEnv: key},
		Tags:           tags,
		// Memory snapshots only where the account asked for them.
		ExperimentalEnableSnapshot: tags[TagMemory] == "1",
	})
	if err != nil {
		return core.Box{}, wrap(err, "create", "", c.secret, key)
	}
	b := p.box(c, found{sb: sb, tags: tags, running: true}, false)
	p.withURL(ctx, c, &b, sb)
	return b, nil
}

// Delete implements core.Provider: terminate, and delete the snapshot.
func (p *Provider) Delete(ctx context.Context, acct core.Account, id string) (err error) {
	defer func(t time.Time) { p.observe("delete", t, err) }(time.Now())
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := p.clientFor(ctx, acct)
	if err != nil {
		return err
	}
	f, err := p.inspect(ctx, c, acct, id)
	if core.IsKind(err, core.KindNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if f.running {
		if _, err := f.sb.Terminate(ctx, nil); err != nil {
			return wrap(err, "terminate", id, c.secret)
		}
	}
	if snap := f.tags[TagSnapshot]; snap != "" {
		var nf modalsdk.NotFoundError
		if err := c.sdk.Images.Delete(ctx, snap, nil); err != nil && !errors.As(err, &nf) {
			return wrap(err, "delete snapshot of", id, c.secret)
		}
	}
	return nil
}
