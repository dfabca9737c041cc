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

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/core"
)

// List returns every box of this provider's scope, with state, URL, key,
// size and (for running boxes) last activity.
func (p *Provider) List(ctx context.Context, acct core.Account) ([]core.Box, error) {
	if p.setup != nil {
		return nil, p.setup
	}
	lctx, cancel := context.WithTimeout(ctx, metaTimeout)
	res, err := p.cli.ContainerList(lctx, client.ContainerListOptions{
		All:     true,
		Filters: p.scopeFilter(),
	})
	cancel()
	if err != nil {
		return nil, p.wrap(err, "list boxes", "")
	}
	if len(res.Items) == 0 {
		return []core.Box{}, nil
	}
	duc := p.startDiskUsage(ctx)

	boxes := make([]described, len(res.Items))
	found := make([]bool, len(res.Items))
	errs := make([]error, len(res.Items))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, c := range res.Items {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ictx, cancel := context.WithTimeout(ctx, metaTimeout)
			ins, err := p.cli.ContainerInspect(ictx, c.ID, client.ContainerInspectOptions{})
			cancel()
			if cerrdefs.IsNotFound(err) {
				return // removed since it was listed
			}
			if err != nil {
				errs[i] = p.wrap(err, "inspect", c.ID)
				return
			}
			boxes[i] = p.describe(ctx, ins.Container, true)
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

// Get returns one box of this scope; KindNotFound when the container is
// gone or is not one of this scope's boxes.
func (p *Provider) Get(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
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
func (p *Provider) inspect(ctx context.Context, boxID string) (container.InspectResponse, error) {
	if boxID == "" {
		return container.InspectResponse{}, core.Errorf(core.KindNotFound, "empty box id")
	}
	ictx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	res, err := p.cli.ContainerInspect(ictx, boxID, client.ContainerInspectOptions{})
	if err != nil {
		return container.InspectResponse{}, p.wrap(err, "inspect", boxID)
	}
	if !p.owns(res.Container.Config) {
		// Someone else's container: as far as this provider goes, no box.
		return container.InspectResponse{}, core.Errorf(core.KindNotFound, "box %s not found at the Docker Engine (that container is not a companion box of scope %q)", boxID, p.cfg.Scope)
	}
	return res.Container, nil
}

func (p *Provider) owns(cfg *container.Config) bool {
	return cfg != nil && cfg.Labels[LabelBox] == "1" && cfg.Labels[LabelScope] == p.cfg.Scope
}

func (p *Provider) scopeFilter() client.Filters {
	return make(client.Filters).Add("label", LabelBox+"=1", LabelScope+"="+p.cfg.Scope)
}

// described is a box and the name of its /workspace volume.
type described struct {
	core.Box
	volume string
}

// describe reads a box from a container. probe allows asking a running
// box's agent-server for its idle clock.
func (p *Provider) describe(ctx context.Context, ins container.InspectResponse, probe bool) described {
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
		case container.StateExited:
			p.classifyStop(ctx, &b, ins.ID, st)
		case container.StatePaused:
			b.StopReason = core.StopOutside // frozen by `docker pause`; companion never freezes
		case container.StateRunning:
			if st.Paused {
				b.StopReason = core.StopOutside
			}
		}
		if st.Status == container.StateRunning && !st.Paused {
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
		if m.Type == mount.TypeVolume && m.Destination == workspaceDir {
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
func mapState(st *container.State) core.State {
	switch st.Status {
	case container.StateRunning:
		switch {
		case st.Paused:
			return core.StatePaused
		case st.Restarting:
			return core.StateResuming
		}
		return core.StateRunning
	case container.StatePaused:
		return core.StatePaused // frozen by `docker pause`
	case container.StateExited, container.StateCreated:
		return core.StatePaused
	case container.StateRestarting:
		return core.StateResuming
	case container.StateRemoving:
		return core.StateDeleting
	case container.StateDead:
		return core.StateError
	}
	return core.StateUnknown
}

// publishedURL is the agent-server's URL on the host, from the port the
// engine bound for 8000/tcp.
func publishedURL(ns *container.NetworkSettings) string {
	if ns == nil {
		return ""
	}
	port, err := network.ParsePort(agentPort)
	if err != nil {
		return ""
	}
	for _, b := range ns.Ports[port] {
		if b.HostPort == "" {
			continue
		}
		host := "127.0.0.1"
		if b.HostIP.IsValid() && !b.HostIP.IsUnspecified() {
			host = b.HostIP.String()
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

// Create makes and starts the box of spec.WorkspaceID. If that workspace's
// container already exists (a retried create), it is returned, and started
// if it never was.
func (p *Provider) Create(ctx context.Context, acct core.Account, spec core.CreateSpec) (core.Box, error) {
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
	port := network.MustParsePort(agentPort)
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	created, err := p.cli.ContainerCreate(cctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:        image,
			Env:          []string{keyEnv + "=" + key},
			Labels:       labels,
			ExposedPorts: network.PortSet{port: {}},
		},
		HostConfig: &container.HostConfig{
			// Loopback only, on a port the engine picks.
			PortBindings: network.PortMap{port: {{HostIP: netip.AddrFrom4([4]byte{127, 0, 0, 1})}}},
			// No Source: the engine makes the volume with the container
			// and removes it with the container (RemoveVolumes).
			Mounts: []mount.Mount{{
				Type:          mount.TypeVolume,
				Target:        workspaceDir,
				VolumeOptions: &mount.VolumeOptions{Labels: labels},
			}},
		},
	})
	cancel()
	switch {
	case cerrdefs.IsConflict(err):
		return p.adoptExisting(ctx, name, spec.WorkspaceID)
	case cerrdefs.IsNotFound(err):
		// It was there a moment ago (ensureImage): removed since.
		return core.Box{}, &core.Error{
			Kind:    core.KindUnavailable,
			Message: fmt.Sprintf("image %s was removed from the Docker Engine while the box was being created; it is pulled again on retry", image),
			Err:     err,
		}
	case err != nil:
		return core.Box{}, p.wrapSecret(err, "create box for workspace "+spec.WorkspaceID, "", key)
	}
	p.log.Info("box created", "box", created.ID, "workspace", spec.WorkspaceID, "image", image)
	if err := p.start(ctx, created.ID); err != nil {
		if ctx.Err() == nil {
			// A box that cannot start (its port, its image) is removed, so
			// that a retry starts from scratch.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			if _, rerr := p.cli.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); rerr != nil {
				p.log.Warn("could not remove a box that failed to start", "box", created.ID, "err", rerr)
			}
			cancel()
		}
		return core.Box{}, err
	}
	return p.get(ctx, created.ID, true)
}

// adoptExisting resolves a name conflict on create: the container is this
// workspace's box from an earlier attempt, or someone else's.
func (p *Provider) adoptExisting(ctx context.Context, name, workspaceID string) (core.Box, error) {
	ictx, cancel := context.WithTimeout(ctx, metaTimeout)
	res, err := p.cli.ContainerInspect(ictx, name, client.ContainerInspectOptions{})
	cancel()
	if err != nil {
		return core.Box{}, p.wrap(err, "inspect existing container "+name+" for", workspaceID)
	}
	ins := res.Container
	if !p.owns(ins.Config) || ins.Config.Labels[core.LabelWorkspace] != workspaceID {
		return core.Box{}, core.Errorf(core.KindConflict, "a container named %s already exists and is not the box of workspace %s in scope %q: remove or rename it", name, workspaceID, p.cfg.Scope)
	}
	if ins.State != nil && ins.State.Status == container.StateCreated {
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
	if _, err := p.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return p.wrap(err, "start", id)
	}
	return nil
}

// Suspend stops the box: its files stay, its processes end. The agent-server
// gets SIGTERM and Config.StopTimeout to exit. A stopped box stays stopped.
func (p *Provider) Suspend(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
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
func (p *Provider) stop(ctx context.Context, ins container.InspectResponse) error {
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
	if _, err := p.cli.ContainerStop(sctx, ins.ID, client.ContainerStopOptions{Timeout: &secs}); err != nil {
		return p.wrap(err, "stop", ins.ID)
	}
	return nil
}

// Resume starts a stopped box (same id, same files; a new agent-server
// process, possibly on a new host port) or unfreezes a paused one. A
// running box is returned as it is.
func (p *Provider) Resume(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
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
	case st.Status == container.StateRemoving:
		return core.Box{}, &core.Error{Kind: core.KindConflict, Message: "box " + boxID + " is being removed", State: core.StateDeleting}
	case st.Status == container.StateDead:
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

// Delete stops the box gracefully (so the agent-server can finish writing)
// and removes it with its volume. A box that is already gone gives
// KindNotFound, which core counts as deleted.
func (p *Provider) Delete(ctx context.Context, acct core.Account, boxID string) error {
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
	_, err = p.cli.ContainerRemove(rctx, ins.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	cancel()
	switch {
	case cerrdefs.IsNotFound(err):
		// Removed by someone else since the inspect; its volume may remain.
	case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress"):
		// The engine is removing it already; a retry will find it gone.
		return &core.Error{Kind: core.KindUnavailable, Message: "box " + ins.ID + " is being removed; try again shortly", Err: err}
	case err != nil:
		return p.wrap(err, "remove", ins.ID)
	}
	// The engine removes the anonymous volume with the container; a volume
	// left over (a named one, say) is removed here.
	for _, m := range ins.Mounts {
		if m.Type == mount.TypeVolume && m.Destination == workspaceDir && m.Name != "" {
			vctx, cancel := context.WithTimeout(ctx, removeTimeout)
			_, err := p.cli.VolumeRemove(vctx, m.Name, client.VolumeRemoveOptions{})
			cancel()
			if err != nil && !cerrdefs.IsNotFound(err) {
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
	if _, err := p.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); err != nil {
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
