package modal

import (
	"context"
	"errors"
	"maps"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
	modalsdk "github.com/modal-labs/modal-client/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Suspend implements core.Provider: a filesystem snapshot (30-day TTL),
// recorded on the sandbox's tags, then terminate; with memory_snapshot, a
// memory snapshot first. Without it memory is not kept.
func (p *Provider) Suspend(ctx context.Context, acct core.Account, id string) (b core.Box, err error) {
	defer func(t time.Time) { p.observe("suspend", t, err) }(time.Now())
	ctx, cancel := context.WithTimeout(ctx, 2*callTimeout)
	defer cancel()
	c, err := p.clientFor(ctx, acct)
	if err != nil {
		return core.Box{}, err
	}
	f, err := p.inspect(ctx, c, acct, id)
	if err != nil {
		return core.Box{}, err
	}
	if !f.running {
		live, err := p.snapshotLive(ctx, c, f)
		if err != nil {
			return core.Box{}, err
		}
		if !live {
			return core.Box{}, core.Errorf(core.KindNotFound, "box %s was terminated by Modal (idle timeout or timeout) without a snapshot: its files are gone", id)
		}
		return p.box(c, f, true), nil
	}
	tags := maps.Clone(f.tags)
	if f.tags[TagMemory] == "1" {
		mem, err := f.sb.ExperimentalSnapshot(ctx, nil)
		if err != nil {
			return core.Box{}, wrap(err, "memory snapshot of", id, c.secret)
		}
		tags[TagMemorySnapshot] = mem.SnapshotID
	}
	img, err := f.sb.SnapshotFilesystem(ctx, &modalsdk.SandboxSnapshotFilesystemParams{TTL: SnapshotTTL})
	if err != nil {
		return core.Box{}, wrap(err, "snapshot", id, c.secret)
	}
	tags[TagSnapshot] = img.ImageID
	tags[TagPausedAt] = time.Now().UTC().Format(time.RFC3339)
	if err := f.sb.SetTags(ctx, tags, nil); err != nil {
		return core.Box{}, wrap(err, "record snapshot of", id, c.secret)
	}
	if _, err := f.sb.Terminate(ctx, nil); err != nil {
		return core.Box{}, wrap(err, "terminate", id, c.secret)
	}
	f.tags, f.running = tags, false
	return p.box(c, f, true), nil
}

// Resume implements core.Provider: a new sandbox from the paused box's
// snapshot (a new id, URL and key), tagged with the box it replaced; a
// retried resume finds that sandbox instead of making another. The
// snapshot it came from is deleted once the new sandbox runs.
func (p *Provider) Resume(ctx context.Context, acct core.Account, id string) (b core.Box, err error) {
	defer func(t time.Time) { p.observe("resume", t, err) }(time.Now())
	ctx, cancel := context.WithTimeout(ctx, 2*callTimeout)
	defer cancel()
	c, err := p.clientFor(ctx, acct)
	if err != nil {
		return core.Box{}, err
	}
	f, err := p.inspect(ctx, c, acct, id)
	if err != nil {
		return core.Box{}, err
	}
	if f.running {
		return p.box(c, f, false), nil
	}
	if have, err := p.list(ctx, c, acct, map[string]string{TagResumedFrom: id}); err != nil {
		return core.Box{}, err
	} else if len(have) > 0 {
		return have[0], nil
	}
	snap := f.tags[TagSnapshot]
	if snap == "" {
		return core.Box{}, core.Errorf(core.KindNotFound, "box %s was terminated by Modal without a snapshot: nothing to resume; restore the workspace from an export", id)
	}
	img, err := c.sdk.Images.FromID(ctx, snap, nil)
	var nf modalsdk.NotFoundError
	if errors.As(err, &nf) {
		return core.Box{}, core.Errorf(core.KindNotFound, "the snapshot of box %s expired or was deleted at Modal: restore the workspace from an export", id)
	}
	if err != nil {
		return core.Box{}, wrap(err, "resume", id, c.secret)
	}
	tags := map[string]string{TagResumedFrom: id}
	for _, k := range []string{TagAccount, core.LabelWorkspace, core.LabelOwner, TagName, TagMemory} {
		if v := f.tags[k]; v != "" {
			tags[k] = v
		}
	}
	nb, ok, err := p.restoreMemory(ctx, c, acct, f, tags)
	if err != nil {
		return core.Box{}, err
	}
	if !ok {
		if nb, err = p.start(ctx, c, acct, img, tags, 0); err != nil {
			return core.Box{}, err
		}
	}
	if err := c.sdk.Images.Delete(ctx, snap, nil); err != nil && !errors.As(err, &nf) {
		p.log.Warn("snapshot left after resume; it expires on its own", "box", id, "new_box", nb.ID, "err", wrap(err, "delete snapshot of", id, c.secret))
	}
	return nb, nil
}

func memoryEnabled(acct core.Account) bool {
	v := strings.ToLower(strings.TrimSpace(acct.Config[ConfigMemory]))
	return v == "true" || v == "1" || v == "yes"
}

// restoreMemory resumes f from its memory snapshot, when it has a live
// one: a new sandbox with f's running processes (and so f's agent-server
// key: the nonce is carried over). The restore is named after the box it
// replaces, so a retried one meets AlreadyExists and takes the sandbox the
// first made. ok is false when there is no memory snapshot to use (none,
// or expired after its 7 days): the caller falls back to the filesystem.
func (p *Provider) restoreMemory(ctx context.Context, c *client, acct core.Account, f found, tags map[string]string) (core.Box, bool, error) {
	memID := f.tags[TagMemorySnapshot]
	if memID == "" {
		return core.Box{}, false, nil
	}
	id := f.sb.SandboxID
	snap, err := c.sdk.SandboxSnapshots.FromID(ctx, memID, nil)
	if err != nil {
		return core.Box{}, false, wrap(err, "resume", id, c.secret)
	}
	name := "companion-resume-" + id
	sb, err := c.sdk.Sandboxes.ExperimentalFromSnapshot(ctx, snap, &modalsdk.SandboxExperimentalFromSnapshotParams{Name: &name})
	var nf modalsdk.NotFoundError
	var ae modalsdk.AlreadyExistsError
	switch {
	case errors.As(err, &nf) || status.Code(err) == codes.NotFound:
		p.log.Info("memory snapshot gone; resuming from the filesystem snapshot", "box", id)
		return core.Box{}, false, nil
	case errors.As(err, &ae) || status.Code(err) == codes.AlreadyExists:
		appName := acct.Config[ConfigApp]
		if appName == "" {
			appName = DefaultApp
		}
		if sb, err = c.sdk.Sandboxes.FromName(ctx, appName, name, &modalsdk.SandboxFromNameParams{Environment: acct.Config[ConfigEnvironment]}); err != nil {
			return core.Box{}, false, wrap(err, "find the restore of", id, c.secret)
		}
	case err != nil:
		return core.Box{}, false, wrap(err, "restore memory of", id, c.secret)
	}
	tags = maps.Clone(tags)
	tags[TagKeyNonce] = f.tags[TagKeyNonce] // the restored agent-server keeps its key
	if err := sb.SetTags(ctx, tags, nil); err != nil {
		return core.Box{}, false, wrap(err, "tag the restore of", id, c.secret)
	}
	return p.box(c, found{sb: sb, tags: tags, running: true}, false), true, nil
}
