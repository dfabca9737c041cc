package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker/internal/engine"
)

// readMeta reads and checks docker.json from src.
func readMeta(src core.SnapshotSource) (SnapshotMeta, error) {
	var m SnapshotMeta
	r, err := src.Open(SnapshotMetaName)
	if err != nil {
		return m, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxMetaBytes+1))
	if err != nil {
		return m, err
	}
	if len(b) > maxMetaBytes {
		return m, core.Errorf(core.KindInvalid, "%s of this export is larger than %d bytes: not a docker snapshot companion wrote", SnapshotMetaName, maxMetaBytes)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, core.Errorf(core.KindInvalid, "%s of this export cannot be read: %v", SnapshotMetaName, err)
	}
	if m.Version != snapshotVersion {
		return m, core.Errorf(core.KindInvalid, "%s of this export has version %d; this companion restores version %d", SnapshotMetaName, m.Version, snapshotVersion)
	}
	if m.Layer.File != "" && m.Layer.File != SnapshotLayerName {
		return m, core.Errorf(core.KindInvalid, "%s names an unexpected layer file %q", SnapshotMetaName, m.Layer.File)
	}
	for _, d := range m.Layer.Deleted {
		if !path.IsAbs(d) || path.Clean(d) != d || d == "/" {
			return m, core.Errorf(core.KindInvalid, "%s lists a deleted path %q that is not a clean path below /", SnapshotMetaName, d)
		}
	}
	for _, mt := range m.Mounts {
		if mt.File != "" && (!path.IsAbs(mt.Destination) || path.Clean(mt.Destination) == "/") {
			return m, core.Errorf(core.KindInvalid, "%s has a volume at %q, which is not a directory below /", SnapshotMetaName, mt.Destination)
		}
	}
	return m, nil
}

// restoreImage returns the image to create the restored box from: the
// exact image id when the engine has it, else the reference. Nothing is
// pulled: an image that is gone must be loaded or built again by the
// person (and the id may not be pullable at all).
func (p *Provider) restoreImage(ctx context.Context, m SnapshotMeta) (string, error) {
	if m.ImageID != "" {
		if ok, err := p.imagePresent(ctx, m.ImageID); err != nil {
			return "", err
		} else if ok {
			return m.ImageID, nil
		}
	}
	if m.Image != "" {
		if ok, err := p.imagePresent(ctx, m.Image); err != nil {
			return "", err
		} else if ok {
			p.log.Warn("the snapshot's exact image is gone; restoring onto the image its reference names now", "image", m.Image, "image_id", m.ImageID)
			return m.Image, nil
		}
	}
	return "", &core.Error{Kind: core.KindConflict, Message: fmt.Sprintf(
		"the image this snapshot was taken on (%s, id %s) is no longer at the Docker Engine, and a restore does not pull it: load or build it again (docker load, docker build, or docker pull where a registry is reachable), then restore again",
		m.Image, m.ImageID)}
}

// CheckRestore implements core.Snapshotter: docker.json is readable and
// its image is at the engine.
func (p *Provider) CheckRestore(ctx context.Context, acct core.Account, src core.SnapshotSource) error {
	if err := p.pingEngine(ctx); err != nil {
		return err
	}
	m, err := readMeta(src)
	if err != nil {
		return err
	}
	_, err = p.restoreImage(ctx, m)
	return err
}

// Restore implements core.Snapshotter. It creates the box's container
// (not started), puts the layer and each volume back with PUT
// /containers/{id}/archive, and only then starts it. A container of this
// workspace left by an earlier attempt is returned if it was started (the
// restore got that far), and removed and made again if it never was (its
// uploads may be partial).
func (p *Provider) Restore(ctx context.Context, acct core.Account, spec core.RestoreSpec, src core.SnapshotSource) (core.Box, error) {
	if p.setup != nil {
		return core.Box{}, p.setup
	}
	if !workspaceIDRE().MatchString(spec.WorkspaceID) {
		return core.Box{}, core.Errorf(core.KindInvalid, "workspace id %q cannot name a container", spec.WorkspaceID)
	}
	report := spec.Progress
	if report == nil {
		report = func(string) {}
	}
	m, err := readMeta(src)
	if err != nil {
		return core.Box{}, err
	}
	image, err := p.restoreImage(ctx, m)
	if err != nil {
		return core.Box{}, err
	}
	name := namePrefix + spec.WorkspaceID
	if b, done, err := p.earlierRestore(ctx, name, spec.WorkspaceID); err != nil || done {
		if done {
			// It may have stopped between its start and its deletions.
			p.removeDeleted(ctx, b.ID, m.Layer.Deleted, report)
		}
		return b, err
	}
	key := spec.AgentKey
	if key == "" {
		if key, err = newKey(); err != nil {
			return core.Box{}, core.Errorf(core.KindInternal, "make a session key: %v", err)
		}
	}
	labels := map[string]string{}
	for k, v := range m.Labels {
		if !strings.HasPrefix(k, "companion.") {
			labels[k] = v
		}
	}
	labels[LabelBox], labels[LabelScope], labels[core.LabelWorkspace], labels[LabelName] = "1", p.cfg.Scope, spec.WorkspaceID, spec.Name
	env := []string{}
	for _, e := range m.Env {
		if n, _, _ := strings.Cut(e, "="); !secretEnv(n) {
			env = append(env, e)
		}
	}
	env = append(env, keyEnv+"="+key)
	exposed := map[string]struct{}{agentPort: {}}
	for _, s := range m.ExposedPorts {
		if pt, err := engine.ParsePort(s); err == nil {
			exposed[pt] = struct{}{}
		}
	}
	// Each captured volume gets a new anonymous volume at its place:
	// made and removed with the container, like a created box's.
	var mounts []engine.Mount
	for _, mt := range m.Mounts {
		if mt.File != "" {
			mounts = append(mounts, engine.Mount{Type: engine.MountVolume, Target: mt.Destination, ReadOnly: mt.ReadOnly,
				VolumeOptions: &engine.VolumeOptions{Labels: map[string]string{LabelBox: "1", LabelScope: p.cfg.Scope, core.LabelWorkspace: spec.WorkspaceID}}})
		}
	}
	cfg := &engine.Config{Image: image, Env: env, Labels: labels, ExposedPorts: exposed, WorkingDir: m.WorkingDir, User: m.User}
	if len(m.Cmd) > 0 {
		cfg.Cmd = m.Cmd
	}
	if len(m.Entrypoint) > 0 {
		cfg.Entrypoint = m.Entrypoint
	}
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	createdID, err := p.cli.ContainerCreate(cctx, name, cfg, &engine.HostConfig{
		PortBindings: map[string][]engine.PortBinding{agentPort: {{HostIP: "127.0.0.1"}}},
		Mounts:       mounts,
	})
	cancel()
	if err != nil {
		return core.Box{}, p.wrapSecret(err, "create the restored box of workspace "+spec.WorkspaceID, "", key)
	}
	p.log.Info("restored box created; uploading its files", "box", createdID, "workspace", spec.WorkspaceID, "image", image)
	if err := p.upload(ctx, createdID, m, src, report); err != nil {
		p.removeQuietly(ctx, createdID)
		return core.Box{}, err
	}
	report("restore: starting the box")
	if err := p.start(ctx, createdID); err != nil {
		p.removeQuietly(ctx, createdID)
		return core.Box{}, err
	}
	p.removeDeleted(ctx, createdID, m.Layer.Deleted, report)
	return p.get(ctx, createdID, true)
}

// rmArgBytes bounds the paths of one rm, far below any kernel's limit on
// a command line.
const rmArgBytes = 64 << 10

// removeDeleted deletes, in the started restored box, the image paths the
// snapshotted box had deleted. The archive API can add files but not
// delete them, so this runs rm in the box (exec), as the box's user,
// like the process that deleted them. A box whose image has no rm keeps
// them, and the log says so: the restore itself stands. rm -rf of a path
// already gone succeeds, so a resumed restore runs it again safely.
func (p *Provider) removeDeleted(ctx context.Context, id string, paths []string, report func(string)) {
	if len(paths) > 0 {
		report(fmt.Sprintf("restore: deleting %d paths the box had deleted", len(paths)))
	}
	for len(paths) > 0 {
		n, size := 0, 0
		for n < len(paths) && (n == 0 || size+len(paths[n]) <= rmArgBytes) {
			size += len(paths[n]) + 1
			n++
		}
		ectx, cancel := context.WithTimeout(ctx, removeTimeout)
		code, out, err := p.cli.Exec(ectx, id, append([]string{"rm", "-rf", "--"}, paths[:n]...))
		cancel()
		if err == nil && code != 0 {
			err = fmt.Errorf("rm exited with %d: %s", code, strings.TrimSpace(out))
		}
		if err != nil {
			p.log.Warn("the restored box may still have image paths the snapshotted box had deleted: rm in the box failed",
				"box", id, "paths_left", len(paths), "first", paths[0], "err", err)
			return
		}
		paths = paths[n:]
	}
}

// earlierRestore looks for the container an interrupted restore of this
// workspace left. done means it was started and is the answer.
func (p *Provider) earlierRestore(ctx context.Context, name, workspaceID string) (core.Box, bool, error) {
	ictx, cancel := context.WithTimeout(ctx, metaTimeout)
	ins, err := p.cli.ContainerInspect(ictx, name)
	cancel()
	if engine.IsNotFound(err) {
		return core.Box{}, false, nil
	}
	if err != nil {
		return core.Box{}, false, p.wrap(err, "inspect existing container "+name+" for", workspaceID)
	}
	if !p.owns(ins.Config) || ins.Config.Labels[core.LabelWorkspace] != workspaceID {
		return core.Box{}, false, core.Errorf(core.KindConflict, "a container named %s already exists and is not the box of workspace %s in scope %q: remove or rename it", name, workspaceID, p.cfg.Scope)
	}
	if ins.State != nil && ins.State.Status == engine.StateCreated {
		p.log.Info("an interrupted restore left a box that never started; making it again", "box", ins.ID, "workspace", workspaceID)
		rctx, cancel := context.WithTimeout(ctx, removeTimeout)
		err := p.cli.ContainerRemove(rctx, ins.ID, true, true)
		cancel()
		if err != nil && !engine.IsNotFound(err) {
			return core.Box{}, false, p.wrap(err, "remove the unfinished restored box", ins.ID)
		}
		return core.Box{}, false, nil
	}
	p.log.Info("the restored box already existed; returning it", "box", ins.ID, "workspace", workspaceID)
	b, err := p.get(ctx, ins.ID, true)
	return b, true, err
}

// upload puts the layer and the volumes into the created container.
func (p *Provider) upload(ctx context.Context, id string, m SnapshotMeta, src core.SnapshotSource, report func(string)) error {
	sizes := map[string]int64{}
	var total int64
	for _, f := range src.Files() {
		sizes[f.Name] = f.Bytes
	}
	type part struct{ file, dest string }
	var parts []part
	if m.Layer.File != "" {
		parts = append(parts, part{m.Layer.File, "/"})
	}
	for _, mt := range m.Mounts {
		if mt.File != "" {
			parts = append(parts, part{mt.File, path.Dir(path.Clean(mt.Destination))})
		}
	}
	for _, pt := range parts {
		total += sizes[pt.file]
	}
	var sent int64
	for _, pt := range parts {
		r, err := src.Open(pt.file)
		if err != nil {
			return err
		}
		// Reported every progressEvery bytes; core throttles what it
		// publishes.
		last := sent
		counted := readFunc(func(b []byte) (int, error) {
			n, err := r.Read(b)
			sent += int64(n)
			if sent-last >= progressEvery {
				last = sent
				report(fmt.Sprintf("restore: uploading %s, %d of %d bytes", pt.file, sent, total))
			}
			return n, err
		})
		report(fmt.Sprintf("restore: uploading %s, %d of %d bytes", pt.file, sent, total))
		actx, cancel := context.WithTimeout(ctx, archiveTimeout)
		err = p.cli.CopyToContainer(actx, id, pt.dest, counted, true)
		cancel()
		// The source's own error (a hash mismatch) says more than the
		// engine's view of a cut upload.
		rerr := r.Close()
		if err != nil {
			if se := sourceErr(r); se != nil {
				return se
			}
			return p.wrap(err, "upload "+pt.file+" into", id)
		}
		if rerr != nil {
			return rerr
		}
	}
	return nil
}

// sourceErr is the error a source reader ended with, if it keeps one.
func sourceErr(r io.ReadCloser) error {
	if e, ok := r.(interface{ Err() error }); ok {
		return e.Err()
	}
	return nil
}

func (p *Provider) removeQuietly(ctx context.Context, id string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	if err := p.cli.ContainerRemove(rctx, id, true, true); err != nil && !engine.IsNotFound(err) {
		p.log.Warn("could not remove an unfinished restored box", "box", id, "err", err)
	}
}

// progressEvery is how many uploaded bytes pass between progress lines.
const progressEvery = 4 << 20

type readFunc func([]byte) (int, error)

func (f readFunc) Read(b []byte) (int, error) { return f(b) }
