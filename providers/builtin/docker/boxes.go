package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker/internal/engine"
)

// doList returns every box of this provider's scope, with state, URL, key,
// size and (for running boxes) last activity.
func (p *Provider) doList(ctx context.Context, acct core.Account) ([]core.Box, error) {
	if p.setup != nil {
		return nil, p.setup
	}
	lctx, cancel := context.WithTimeout(ctx, metaTimeout)
	res, err := p.cli.ContainerList(lctx, true, p.scopeFilter())
	cancel()
	if err != nil {
		return nil, p.wrap(err, "list boxes", "")
	}
	if len(res) == 0 {
		return []core.Box{}, nil
	}
	duc := p.startDiskUsage(ctx)

	boxes := make([]described, len(res))
	found := make([]bool, len(res))
	errs := make([]error, len(res))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, c := range res {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ictx, cancel := context.WithTimeout(ctx, metaTimeout)
			ins, err := p.cli.ContainerInspect(ictx, c.ID)
			cancel()
			if engine.IsNotFound(err) {
				return // removed since it was listed
			}
			if err != nil {
				errs[i] = p.wrap(err, "inspect", c.ID)
				return
			}
			boxes[i] = p.describe(ctx, ins, true)
			found[i] = true
		})
	}
	wg.Wait()
	du := <-duc
	out := make([]core.Box, 0, len(boxes))
	for i := range boxes {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if found[i] {
			boxes[i].setSize(du)
			out = append(out, boxes[i].Box)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// doGet returns one box of this scope; KindNotFound when the container is
// gone or is not one of this scope's boxes.
func (p *Provider) doGet(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
	if p.setup != nil {
		return core.Box{}, p.setup
	}
	return p.get(ctx, boxID, true)
}

func (p *Provider) get(ctx context.Context, boxID string, probe bool) (core.Box, error) {
	ins, err := p.inspect(ctx, boxID)
	if err != nil {
		return core.Box{}, err
	}
	duc := p.startDiskUsage(ctx)
	d := p.describe(ctx, ins, probe)
	d.setSize(<-duc)
	return d.Box, nil
}

// startDiskUsage measures in the background while boxes are inspected and
// probed. A failure leaves sizes unknown (nil) rather than failing the
// read: a size is an extra, the state is what matters.
func (p *Provider) startDiskUsage(ctx context.Context) <-chan *usage {
	c := make(chan *usage, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, dfTimeout)
		defer cancel()
		u, err := p.diskUsage(ctx)
		if err != nil {
			p.log.Warn("could not measure box sizes", "err", err)
		}
		c <- u
	}()
	return c
}

// inspect returns the container boxID if it is a box of this scope.
func (p *Provider) inspect(ctx context.Context, boxID string) (engine.Inspect, error) {
	if boxID == "" {
		return engine.Inspect{}, core.Errorf(core.KindNotFound, "empty box id")
	}
	ictx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	res, err := p.cli.ContainerInspect(ictx, boxID)
	if err != nil {
		return engine.Inspect{}, p.wrap(err, "inspect", boxID)
	}
	if !p.owns(res.Config) {
		// Someone else's container: as far as this provider goes, no box.
		return engine.Inspect{}, core.Errorf(core.KindNotFound, "box %s not found at the Docker Engine (that container is not a companion box of scope %q)", boxID, p.cfg.Scope)
	}
	return res, nil
}

func (p *Provider) owns(cfg *engine.Config) bool {
	return cfg != nil && cfg.Labels[LabelBox] == "1" && cfg.Labels[LabelScope] == p.cfg.Scope
}

func (p *Provider) scopeFilter() engine.Filters {
	return engine.Filters{"label": {LabelBox + "=1", LabelScope + "=" + p.cfg.Scope}}
}

// described is a box and the name of its /workspace volume.
type described struct {
	core.Box
	volume string
}

// describe reads a box from a container. probe allows asking a running
// box's agent-server for its idle clock.
func (p *Provider) describe(ctx context.Context, ins engine.Inspect, probe bool) described {
	var labels map[string]string
	var env []string
	if ins.Config != nil {
		labels, env = ins.Config.Labels, ins.Config.Env
	}
	b := core.Box{
		ID:     ins.ID,
		Name:   strings.TrimPrefix(ins.Name, "/"),
		State:  core.StateUnknown,
		Labels: map[string]string{},
	}
	for k, v := range labels {
		if strings.HasPrefix(k, "companion.") {
			b.Labels[k] = v
		}
	}
	if n := labels[LabelName]; n != "" {
		b.Name = n
	}
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, keyEnv+"="); ok {
			b.Key = v
		}
	}
	b.CreatedAt = parseTime(ins.Created)
	if st := ins.State; st != nil {
		b.State = mapState(st)
		switch st.Status {
		case engine.StateExited:
			p.classifyStop(ctx, &b, ins.ID, st)
		case engine.StatePaused:
			b.StopReason = core.StopOutside // frozen by `docker pause`; companion never freezes
		case engine.StateRunning:
			if st.Paused {
				b.StopReason = core.StopOutside
			}
		}
		if st.Status == engine.StateRunning && !st.Paused {
			b.URL = publishedURL(ins.NetworkSettings)
		}
	}
	if probe && b.URL != "" && b.State == core.StateRunning {
		b.LastActivityAt = p.lastActivity(ctx, b.URL)
		if b.LastActivityAt.IsZero() && ins.State != nil {
			// Its server is not answering yet (it has just started): the
			// start is its last activity, which is also where the server's
			// idle clock will begin. Reporting nothing would leave an older
			// figure standing, and the first real reading would then look
			// like use.
			b.LastActivityAt = parseTime(ins.State.StartedAt)
		}
	}
	d := described{Box: b}
	for _, m := range ins.Mounts {
		if m.Type == engine.MountVolume && m.Destination == workspaceDir {
			d.volume = m.Name
		}
	}
	return d
}

// setSize fills Size from du: writable layer plus the /workspace volume.
// Both must be known, or the size is left unknown rather than understated.
func (d *described) setSize(du *usage) {
	if du == nil {
		return
	}
	total, ok := du.containers[d.ID]
	if !ok {
		return
	}
	if d.volume != "" {
		v, ok := du.volumes[d.volume]
		if !ok {
			return
		}
		total += v
	}
	d.Size = &core.Size{Bytes: total, Source: core.SizeDockerEngineUsed, At: du.at}
}

// mapState maps the engine's container state to a box state. A container
// that was created but never started counts as paused: it holds no running
// process, Resume starts it and Delete removes it, like a stopped one.
func mapState(st *engine.State) core.State {
	switch st.Status {
	case engine.StateRunning:
		switch {
		case st.Paused:
			return core.StatePaused
		case st.Restarting:
			return core.StateResuming
		}
		return core.StateRunning
	case engine.StatePaused:
		return core.StatePaused // frozen by `docker pause`
	case engine.StateExited, engine.StateCreated:
		return core.StatePaused
	case engine.StateRestarting:
		return core.StateResuming
	case engine.StateRemoving:
		return core.StateDeleting
	case engine.StateDead:
		return core.StateError
	}
	return core.StateUnknown
}

// publishedURL is the agent-server's URL on the host, from the port the
// engine bound for 8000/tcp.
func publishedURL(ns *engine.NetworkSettings) string {
	if ns == nil {
		return ""
	}
	for _, b := range ns.Ports[agentPort] {
		if b.HostPort == "" {
			continue
		}
		host := "127.0.0.1"
		if ip, err := netip.ParseAddr(b.HostIP); err == nil && !ip.IsUnspecified() {
			host = ip.String()
		}
		return "http://" + net.JoinHostPort(host, b.HostPort)
	}
	return ""
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{} // the engine's "0001-01-01T00:00:00Z" means unset
	}
	return t.UTC()
}

// workspaceIDRE is compiled on first use, not during start-up.
var workspaceIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`) })

// doCreate makes and starts the box of spec.WorkspaceID. If that workspace's
// container already exists (a retried create), it is returned, and started
// if it never was.
func (p *Provider) doCreate(ctx context.Context, acct core.Account, spec core.CreateSpec) (core.Box, error) {
	if p.setup != nil {
		return core.Box{}, p.setup
	}
	if !workspaceIDRE().MatchString(spec.WorkspaceID) {
		return core.Box{}, core.Errorf(core.KindInvalid, "workspace id %q cannot name a container: use letters, digits, '_', '.', '-'", spec.WorkspaceID)
	}
	image := p.cfg.Image
	for k, v := range spec.Options {
		switch k {
		case OptionImage:
			if v != "" {
				image = v
			}
		default:
			return core.Box{}, core.Errorf(core.KindInvalid, "unknown docker option %q; the docker provider takes: %s", k, OptionImage)
		}
	}
	if err := p.ensureImage(ctx, image, spec.Progress); err != nil {
		return core.Box{}, p.createImageError(err, image, image != p.cfg.Image)
	}
	name := namePrefix + spec.WorkspaceID
	key := spec.AgentKey
	if key == "" {
		k, err := newKey()
		if err != nil {
			return core.Box{}, core.Errorf(core.KindInternal, "make a session key: %v", err)
		}
		key = k
	}
	labels := map[string]string{
		LabelBox:            "1",
		LabelScope:          p.cfg.Scope,
		core.LabelWorkspace: spec.WorkspaceID,
		LabelName:           spec.Name,
	}
	if spec.Owner != "" {
		labels[core.LabelOwner] = spec.Owner
	}
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	createdID, err := p.cli.ContainerCreate(cctx, name,
		&engine.Config{
			Image:        image,
			Env:          []string{keyEnv + "=" + key},
			Labels:       labels,
			ExposedPorts: map[string]struct{}{agentPort: {}},
		},
		&engine.HostConfig{
			// Loopback only, on a port the engine picks.
			PortBindings: map[string][]engine.PortBinding{agentPort: {{HostIP: "127.0.0.1"}}},
			// No Source: the engine makes the volume with the container
			// and removes it with the container (RemoveVolumes).
			Mounts: []engine.Mount{{
				Type:          engine.MountVolume,
				Target:        workspaceDir,
				VolumeOptions: &engine.VolumeOptions{Labels: labels},
			}},
		})
	cancel()
	switch {
	case engine.IsConflict(err):
		return p.adoptExisting(ctx, name, spec.WorkspaceID)
	case engine.IsNotFound(err):
		// It was there a moment ago (ensureImage): removed since.
		return core.Box{}, &core.Error{
			Kind:    core.KindUnavailable,
			Message: fmt.Sprintf("image %s was removed from the Docker Engine while the box was being created; it is pulled again on retry", image),
			Err:     err,
		}
	case err != nil:
		return core.Box{}, p.wrapSecret(err, "create box for workspace "+spec.WorkspaceID, "", key)
	}
	p.log.Info("box created", "box", createdID, "workspace", spec.WorkspaceID, "image", image)
	if err := p.start(ctx, createdID); err != nil {
		if ctx.Err() == nil {
			// A box that cannot start (its port, its image) is removed, so
			// that a retry starts from scratch.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			if rerr := p.cli.ContainerRemove(rctx, createdID, true, true); rerr != nil {
				p.log.Warn("could not remove a box that failed to start", "box", createdID, "err", rerr)
			}
			cancel()
		}
		return core.Box{}, err
	}
	return p.get(ctx, createdID, true)
}

// adoptExisting resolves a name conflict on create: the container is this
// workspace's box from an earlier attempt, or someone else's.
func (p *Provider) adoptExisting(ctx context.Context, name, workspaceID string) (core.Box, error) {
	ictx, cancel := context.WithTimeout(ctx, metaTimeout)
	ins, err := p.cli.ContainerInspect(ictx, name)
	cancel()
	if err != nil {
		return core.Box{}, p.wrap(err, "inspect existing container "+name+" for", workspaceID)
	}
	if !p.owns(ins.Config) || ins.Config.Labels[core.LabelWorkspace] != workspaceID {
		return core.Box{}, core.Errorf(core.KindConflict, "a container named %s already exists and is not the box of workspace %s in scope %q: remove or rename it", name, workspaceID, p.cfg.Scope)
	}
	if ins.State != nil && ins.State.Status == engine.StateCreated {
		// An earlier create got as far as making the container.
		if err := p.start(ctx, ins.ID); err != nil {
			return core.Box{}, err
		}
	}
	p.log.Info("box already existed; returning it", "box", ins.ID, "workspace", workspaceID)
	return p.get(ctx, ins.ID, true)
}

func (p *Provider) start(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := p.cli.ContainerStart(ctx, id); err != nil {
		return p.wrap(err, "start", id)
	}
	return nil
}

// doSuspend stops the box: its files stay, its processes end. The agent-server
// gets SIGTERM and Config.StopTimeout to exit. A stopped box stays stopped.
func (p *Provider) doSuspend(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
	if p.setup != nil {
		return core.Box{}, p.setup
	}
	ins, err := p.inspect(ctx, boxID)
	if err != nil {
		return core.Box{}, err
	}
	if err := p.stop(ctx, ins); err != nil {
		return core.Box{}, err
	}
	p.log.Info("box stopped", "box", ins.ID)
	return p.get(ctx, ins.ID, false)
}

// stop ends a box's processes if it has any, unfreezing it first if it was
// paused with `docker pause` (a frozen process cannot handle SIGTERM).
func (p *Provider) stop(ctx context.Context, ins engine.Inspect) error {
	st := ins.State
	if st == nil || (!st.Running && !st.Restarting) {
		return nil
	}
	if st.Paused {
		if err := p.unpause(ctx, ins.ID); err != nil {
			return err
		}
	}
	secs := int((p.cfg.StopTimeout + time.Second - 1) / time.Second)
	sctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+stopSlack)
	defer cancel()
	if err := p.cli.ContainerStop(sctx, ins.ID, secs); err != nil {
		return p.wrap(err, "stop", ins.ID)
	}
	return nil
}

// doResume starts a stopped box (same id, same files; a new agent-server
// process, possibly on a new host port) or unfreezes a paused one. A
// running box is returned as it is.
func (p *Provider) doResume(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
	if p.setup != nil {
		return core.Box{}, p.setup
	}
	ins, err := p.inspect(ctx, boxID)
	if err != nil {
		return core.Box{}, err
	}
	st := ins.State
	switch {
	case st == nil:
		return core.Box{}, core.Errorf(core.KindInternal, "box %s: the engine reported no state", boxID)
	case st.Status == engine.StateRemoving:
		return core.Box{}, &core.Error{Kind: core.KindConflict, Message: "box " + boxID + " is being removed", State: core.StateDeleting}
	case st.Status == engine.StateDead:
		return core.Box{}, &core.Error{Kind: core.KindConflict, Message: "box " + boxID + " is dead (the engine failed to remove it): delete it", State: core.StateError}
	case st.Paused:
		if err := p.unpause(ctx, ins.ID); err != nil {
			return core.Box{}, err
		}
	case st.Running || st.Restarting:
		// Already up.
	default:
		if err := p.start(ctx, ins.ID); err != nil {
			return core.Box{}, err
		}
		p.log.Info("box started", "box", ins.ID)
	}
	return p.get(ctx, ins.ID, true)
}

// doDelete stops the box gracefully (so the agent-server can finish writing)
// and removes it with its volume. A box that is already gone gives
// KindNotFound, which core counts as deleted.
func (p *Provider) doDelete(ctx context.Context, acct core.Account, boxID string) error {
	if p.setup != nil {
		return p.setup
	}
	ins, err := p.inspect(ctx, boxID)
	if core.IsKind(err, core.KindNotFound) {
		// core.Provider: deleting a box that is already gone succeeds. A
		// container outside this scope is no box of ours either, and is
		// left alone.
		p.log.Debug("box already gone", "box", boxID)
		return nil
	}
	if err != nil {
		return err
	}
	if err := p.stop(ctx, ins); err != nil && !core.IsKind(err, core.KindNotFound) {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, removeTimeout)
	err = p.cli.ContainerRemove(rctx, ins.ID, true, true)
	cancel()
	switch {
	case engine.IsNotFound(err):
		// Removed by someone else since the inspect; its volume may remain.
	case engine.IsConflict(err) && strings.Contains(err.Error(), "already in progress"):
		// The engine is removing it already; a retry will find it gone.
		return &core.Error{Kind: core.KindUnavailable, Message: "box " + ins.ID + " is being removed; try again shortly", Err: err}
	case err != nil:
		return p.wrap(err, "remove", ins.ID)
	}
	// The engine removes the anonymous volume with the container; a volume
	// left over (a named one, say) is removed here.
	for _, m := range ins.Mounts {
		if m.Type == engine.MountVolume && m.Destination == workspaceDir && m.Name != "" {
			vctx, cancel := context.WithTimeout(ctx, removeTimeout)
			err := p.cli.VolumeRemove(vctx, m.Name)
			cancel()
			if err != nil && !engine.IsNotFound(err) {
				return p.wrap(err, "remove the volume of", ins.ID)
			}
		}
	}
	p.log.Info("box deleted", "box", ins.ID)
	return nil
}

func (p *Provider) unpause(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	if err := p.cli.ContainerUnpause(ctx, id); err != nil {
		return p.wrap(err, "unpause", id)
	}
	return nil
}

func newKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
