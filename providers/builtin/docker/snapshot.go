package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker/internal/engine"
)

// Snapshot files. A snapshot is captured through the Engine API only (no
// root, no access to the engine's storage), so it works the same against
// Docker Desktop on macOS and Windows:
//
//   - docker-rootfs.tar: the container's writable layer. GET
//     /containers/{id}/changes names what was added or modified; each
//     top-most added path and each modified file is read with GET
//     /containers/{id}/archive and re-rooted at / in one tar stream.
//   - docker-volume-N.tar: volume N of docker.json's mounts, read with GET
//     /containers/{id}/archive?path=<destination> (the archive endpoint
//     reads through mounts). Its entries are named from the destination's
//     base name, so it is put back into the destination's parent.
//   - docker.json: the image (id and reference), environment without
//     secrets, labels, command, exposed ports, mounts and what the layer
//     capture left out. Written last, so it describes the files before it.
const (
	SnapshotMetaName  = "docker.json"
	SnapshotLayerName = "docker-rootfs.tar"
	snapshotVersion   = 1
	// maxMetaBytes bounds docker.json when it is read back.
	maxMetaBytes = 4 << 20
	// archiveTimeout bounds one archive read or write to the engine; the
	// caller's context bounds the whole snapshot.
	archiveTimeout = 30 * time.Minute
)

// skipPaths are paths the engine manages itself in every container (bind
// mounted or virtual): never captured, never restored.
var skipPaths = []string{"/proc", "/sys", "/dev", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/.dockerenv"}

// SnapshotMeta is docker.json.
type SnapshotMeta struct {
	Version int `json:"version"`
	// BoxID is the container the snapshot was taken from.
	BoxID      string    `json:"box_id"`
	CapturedAt time.Time `json:"captured_at"`
	// Image is the reference the container was created from; ImageID the
	// exact image (restore prefers it, then the reference).
	Image        string            `json:"image"`
	ImageID      string            `json:"image_id"`
	Env          []string          `json:"env"`
	EnvOmitted   []string          `json:"env_omitted"`
	Labels       map[string]string `json:"labels"`
	Cmd          []string          `json:"cmd"`
	Entrypoint   []string          `json:"entrypoint"`
	WorkingDir   string            `json:"working_dir"`
	User         string            `json:"user"`
	ExposedPorts []string          `json:"exposed_ports"`
	Mounts       []SnapshotMount   `json:"mounts"`
	// Layer is the writable layer's capture.
	Layer SnapshotLayer `json:"layer"`
}

// SnapshotMount is one mount of the container. Volumes are captured into
// File; bind mounts and tmpfs are recorded but not captured (a bind
// mount's data is on the host and outlives the box).
type SnapshotMount struct {
	Type        string `json:"type"`
	Destination string `json:"destination"`
	Name        string `json:"name,omitempty"`
	ReadOnly    bool   `json:"read_only,omitempty"`
	File        string `json:"file,omitempty"`
}

// SnapshotLayer says what of the writable layer was captured.
type SnapshotLayer struct {
	File string `json:"file"`
	// Paths are the top-most captured paths.
	Paths []string `json:"paths"`
	// Deleted are image paths the container deleted. The archive API
	// cannot delete, so a restore runs rm for them in the started box
	// (removeDeleted).
	Deleted []string `json:"deleted"`
}

var _ core.Snapshotter = (*Provider)(nil)

// secretEnv reports whether an environment variable must not be written
// into an export: the agent-server key, and names that say they hold one.
func secretEnv(name string) bool {
	if strings.HasPrefix(name, "OH_SESSION_API_KEYS") {
		return true
	}
	u := strings.ToUpper(name)
	for _, s := range []string{"SECRET", "TOKEN", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "PRIVATE_KEY", "CREDENTIAL"} {
		if strings.Contains(u, s) {
			return true
		}
	}
	return false
}

// Snapshot implements core.Snapshotter: it streams the box's writable
// layer, its volumes and docker.json into sink. Nothing is held whole in
// memory. The container may be running (an export needs its agent-server);
// files it writes during the capture may or may not be in it.
func (p *Provider) Snapshot(ctx context.Context, acct core.Account, boxID string, sink core.SnapshotSink) error {
	if p.setup != nil {
		return p.setup
	}
	ins, err := p.inspect(ctx, boxID)
	if err != nil {
		return err
	}
	meta := SnapshotMeta{Version: snapshotVersion, BoxID: ins.ID, CapturedAt: p.cfg.Now().UTC(), ImageID: ins.Image,
		Env: []string{}, EnvOmitted: []string{}, Labels: map[string]string{}, Cmd: []string{}, Entrypoint: []string{},
		ExposedPorts: []string{}, Mounts: []SnapshotMount{}}
	if c := ins.Config; c != nil {
		meta.Image, meta.WorkingDir, meta.User = c.Image, c.WorkingDir, c.User
		for _, e := range c.Env {
			name, _, _ := strings.Cut(e, "=")
			if secretEnv(name) {
				meta.EnvOmitted = append(meta.EnvOmitted, name)
				continue
			}
			meta.Env = append(meta.Env, e)
		}
		for k, v := range c.Labels {
			meta.Labels[k] = v
		}
		meta.Cmd = append(meta.Cmd, c.Cmd...)
		meta.Entrypoint = append(meta.Entrypoint, c.Entrypoint...)
		for port := range c.ExposedPorts {
			meta.ExposedPorts = append(meta.ExposedPorts, port)
		}
		sort.Strings(meta.ExposedPorts)
	}
	var mounts []string
	for _, m := range ins.Mounts {
		mounts = append(mounts, m.Destination)
		sm := SnapshotMount{Type: m.Type, Destination: m.Destination, Name: m.Name, ReadOnly: !m.RW}
		if m.Type == engine.MountVolume {
			sm.File = fmt.Sprintf("docker-volume-%d.tar", len(meta.Mounts))
		}
		meta.Mounts = append(meta.Mounts, sm)
	}

	dctx, cancel := context.WithTimeout(ctx, metaTimeout)
	diff, err := p.cli.ContainerChanges(dctx, ins.ID)
	cancel()
	if err != nil {
		return p.wrap(err, "list the filesystem changes of", ins.ID)
	}
	meta.Layer = planLayer(diff, mounts)
	meta.Layer.File = SnapshotLayerName
	if err := p.streamInto(sink, SnapshotLayerName, "tar", func(w io.Writer) error {
		return p.writeLayer(ctx, ins.ID, meta.Layer.Paths, w)
	}); err != nil {
		return err
	}
	for _, m := range meta.Mounts {
		if m.File == "" {
			continue
		}
		if err := p.streamInto(sink, m.File, "tar", func(w io.Writer) error {
			return p.copyArchive(ctx, ins.ID, m.Destination, w)
		}); err != nil {
			return fmt.Errorf("volume at %s: %w", m.Destination, err)
		}
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", SnapshotMetaName, err)
	}
	return sink.Add(SnapshotMetaName, "json", strings.NewReader(string(b)+"\n"))
}

// planLayer picks what to archive from the engine's change list: every
// top-most added path (its archive holds what is below it) and every
// modified path that is not a directory whose changes are listed below
// it. Paths the engine manages and mount points (read separately, as
// volumes) are left out.
func planLayer(changes []engine.FilesystemChange, mounts []string) SnapshotLayer {
	l := SnapshotLayer{Paths: []string{}, Deleted: []string{}}
	all := make([]string, 0, len(changes))
	for _, c := range changes {
		all = append(all, c.Path)
	}
	sort.Strings(all)
	hasBelow := func(p string) bool {
		i := sort.SearchStrings(all, p+"/")
		return i < len(all) && strings.HasPrefix(all[i], p+"/")
	}
	excluded := func(p string) bool {
		for _, s := range append(skipPaths[:len(skipPaths):len(skipPaths)], mounts...) {
			if p == s || strings.HasPrefix(p, s+"/") {
				return true
			}
		}
		return false
	}
	sorted := append([]engine.FilesystemChange(nil), changes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var added []string
	under := func(p string) bool {
		for _, a := range added {
			if strings.HasPrefix(p, a+"/") {
				return true
			}
		}
		return false
	}
	for _, c := range sorted {
		p := path.Clean(c.Path)
		if p == "/" || excluded(p) || under(p) {
			continue
		}
		switch c.Kind {
		case engine.ChangeDelete:
			l.Deleted = append(l.Deleted, p)
		case engine.ChangeAdd:
			added = append(added, p)
			l.Paths = append(l.Paths, p)
		case engine.ChangeModify:
			if !hasBelow(p) {
				l.Paths = append(l.Paths, p)
			}
		}
	}
	return l
}

// streamInto runs write on one end of a pipe while sink reads the other,
// so a file streams from the engine into the export without being held.
func (p *Provider) streamInto(sink core.SnapshotSink, name, format string, write func(io.Writer) error) error {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(write(pw))
	}()
	err := sink.Add(name, format, pr)
	pr.CloseWithError(errors.New("snapshot: the export stopped reading"))
	<-done
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", name, err)
	}
	return nil
}

// writeLayer writes one tar holding each path's archive, its entries
// renamed from the archive's root to their place under /.
func (p *Provider) writeLayer(ctx context.Context, id string, paths []string, w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, src := range paths {
		if err := p.appendArchive(ctx, id, src, tw); err != nil {
			return err
		}
	}
	return tw.Close()
}

func (p *Provider) appendArchive(ctx context.Context, id, src string, tw *tar.Writer) error {
	actx, cancel := context.WithTimeout(ctx, archiveTimeout)
	defer cancel()
	res, err := p.cli.CopyFromContainer(actx, id, src)
	if engine.IsNotFound(err) {
		p.log.Debug("changed path gone before it was read", "box", id, "path", src)
		return nil
	}
	if err != nil {
		return p.wrap(err, "read "+src+" of", id)
	}
	defer res.Close()
	// The archive's entries start at src's base name; its parent is
	// where they belong.
	parent := strings.TrimPrefix(path.Dir(src), "/")
	rebase := func(n string) string {
		if n == "" {
			return n
		}
		return path.Join(parent, n)
	}
	tr := tar.NewReader(res)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the archive of %s: %w", src, err)
		}
		h.Name = rebase(h.Name)
		if h.Typeflag == tar.TypeLink {
			h.Linkname = rebase(h.Linkname)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("copy %s: %w", h.Name, err)
		}
	}
}

// copyArchive streams the engine's archive of src as it is.
func (p *Provider) copyArchive(ctx context.Context, id, src string, w io.Writer) error {
	actx, cancel := context.WithTimeout(ctx, archiveTimeout)
	defer cancel()
	res, err := p.cli.CopyFromContainer(actx, id, src)
	if err != nil {
		return p.wrap(err, "read "+src+" of", id)
	}
	defer res.Close()
	if _, err := io.Copy(w, res); err != nil {
		return fmt.Errorf("read %s of box %s: %w", src, shortID(id), err)
	}
	return nil
}
