package docker_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/boximage"
	"github.com/canvasapp/companion/internal/testsupport/dockertest"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// dirSink keeps snapshot files in a directory, with their hashes, like an
// export does.
type dirSink struct {
	dir   string
	files []core.ExportFile
}

func (d *dirSink) Add(name, format string, r io.Reader) error {
	f, err := os.Create(filepath.Join(d.dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if err != nil {
		return err
	}
	d.files = append(d.files, core.ExportFile{Name: name, Kind: core.ExportKindSnapshot, Format: format, Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))})
	return nil
}

// dirSource reads them back, failing a file that differs from its hash.
type dirSource struct{ *dirSink }

func (d dirSource) Files() []core.ExportFile { return d.files }

func (d dirSource) Open(name string) (io.ReadCloser, error) {
	for _, f := range d.files {
		if f.Name == name {
			b, err := os.ReadFile(filepath.Join(d.dir, name))
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(b)
			if hex.EncodeToString(sum[:]) != f.SHA256 {
				return nil, &core.Error{Kind: core.KindConflict, Message: name + " does not match its hash"}
			}
			return io.NopCloser(bytes.NewReader(b)), nil
		}
	}
	return nil, fmt.Errorf("no file %s", name)
}

// putFile writes one file into a container through the Engine API.
func putFile(t *testing.T, cli *client.Client, id, dir, name, content string) {
	t.Helper()
	if err := dockertest.PutFiles(ctxT(t), cli, id, dir, map[string]string{name: content}, 0o644); err != nil {
		t.Fatalf("put %s/%s: %v", dir, name, err)
	}
}

// readFile reads one file out of a container through the Engine API.
func readFile(t *testing.T, cli *client.Client, id, p string) (string, error) {
	t.Helper()
	return dockertest.ReadFile(ctxT(t), cli, id, p)
}

func TestSnapshotAndRestore(t *testing.T) {
	f := newFixture(t, docker.Config{})
	ctx := ctxT(t)
	b := f.create("ws_snap", nil)
	// A file in the volume, one in a new directory of the writable layer,
	// and a nested one there.
	putFile(t, f.cli, b.ID, "/workspace", "notes.txt", "work in the volume")
	putFile(t, f.cli, b.ID, "/", "rootfile.txt", "at the root")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "data/", Mode: 0o755, Typeflag: tar.TypeDir})
	tw.WriteHeader(&tar.Header{Name: "data/deep/", Mode: 0o755, Typeflag: tar.TypeDir})
	tw.WriteHeader(&tar.Header{Name: "data/deep/layer.txt", Mode: 0o600, Size: 5, Typeflag: tar.TypeReg})
	tw.Write([]byte("layer"))
	tw.Close()
	if _, err := f.cli.CopyToContainer(ctx, b.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: &buf}); err != nil {
		t.Fatal(err)
	}
	sink := &dirSink{dir: t.TempDir()}
	if err := f.p.Snapshot(ctx, f.acct, b.ID, sink); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	names := map[string]bool{}
	for _, fl := range sink.files {
		names[fl.Name] = true
	}
	for _, want := range []string{docker.SnapshotMetaName, docker.SnapshotLayerName, "docker-volume-0.tar"} {
		if !names[want] {
			t.Fatalf("snapshot files %v lack %s", names, want)
		}
	}
	metaBytes, _ := os.ReadFile(filepath.Join(sink.dir, docker.SnapshotMetaName))
	if b.Key == "" || bytes.Contains(metaBytes, []byte(b.Key)) {
		t.Fatalf("docker.json holds the agent key (or the box has none): %s", metaBytes)
	}
	for _, fl := range sink.files {
		content, _ := os.ReadFile(filepath.Join(sink.dir, fl.Name))
		if bytes.Contains(content, []byte(b.Key)) {
			t.Fatalf("snapshot file %s holds the agent key", fl.Name)
		}
	}
	t.Logf("docker.json: %s", metaBytes)
	var meta docker.SnapshotMeta
	if err := json.Unmarshal(metaBytes, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.ImageID == "" || meta.Image == "" || len(meta.Mounts) != 1 || meta.Mounts[0].Destination != "/workspace" ||
		!contains(meta.EnvOmitted, "OH_SESSION_API_KEYS_0") || len(meta.ExposedPorts) == 0 {
		t.Fatalf("docker.json: %+v", meta)
	}
	for _, p := range meta.Layer.Paths {
		if strings.HasPrefix(p, "/workspace") || strings.HasPrefix(p, "/proc") || p == "/etc/hosts" {
			t.Fatalf("layer captured %s, which is a mount or the engine's", p)
		}
	}

	if err := f.p.Delete(ctx, f.acct, b.ID); err != nil {
		t.Fatal(err)
	}
	src := dirSource{sink}
	if err := f.p.CheckRestore(ctx, f.acct, src); err != nil {
		t.Fatalf("check restore: %v", err)
	}
	var lines []string
	nb, err := f.p.Restore(ctx, f.acct, core.RestoreSpec{WorkspaceID: "ws_back", Name: "back", AgentKey: "k-new", Progress: func(l string) { lines = append(lines, l) }}, src)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if nb.ID == b.ID || nb.State != core.StateRunning || nb.Key != "k-new" || nb.Labels[core.LabelWorkspace] != "ws_back" {
		t.Fatalf("restored box: %+v", nb)
	}
	if len(lines) == 0 {
		t.Error("restore reported no progress")
	}
	for p, want := range map[string]string{"/workspace/notes.txt": "work in the volume", "/data/deep/layer.txt": "layer", "/rootfile.txt": "at the root"} {
		got, err := readFile(t, f.cli, nb.ID, p)
		if err != nil || got != want {
			t.Errorf("restored %s = %q, %v; want %q", p, got, err, want)
		}
	}
	// Restoring again for the same workspace finds the box, not a second.
	again, err := f.p.Restore(ctx, f.acct, core.RestoreSpec{WorkspaceID: "ws_back", Name: "back", AgentKey: "k-new"}, src)
	if err != nil || again.ID != nb.ID {
		t.Fatalf("second restore: %+v, %v; want box %s", again, err, nb.ID)
	}

	// A snapshot file that no longer matches its hash: nothing is made.
	os.WriteFile(filepath.Join(sink.dir, docker.SnapshotLayerName), []byte("garbage"), 0o600)
	_, err = f.p.Restore(ctx, f.acct, core.RestoreSpec{WorkspaceID: "ws_bad", Name: "bad", AgentKey: "k"}, src)
	if !core.IsKind(err, core.KindConflict) {
		t.Fatalf("restore of a damaged snapshot: %v, want conflict", err)
	}
	boxes, err := f.p.List(ctx, f.acct)
	if err != nil {
		t.Fatal(err)
	}
	for _, bx := range boxes {
		if bx.Labels[core.LabelWorkspace] == "ws_bad" {
			t.Fatalf("a damaged restore left box %+v", bx)
		}
	}
}

func TestRestoreImageGone(t *testing.T) {
	f := newFixture(t, docker.Config{})
	sink := &dirSink{dir: t.TempDir()}
	meta := docker.SnapshotMeta{Version: 1, Image: "companion-test/gone:never", ImageID: "sha256:" + strings.Repeat("0", 64),
		Layer: docker.SnapshotLayer{File: docker.SnapshotLayerName}}
	mb, _ := json.Marshal(meta)
	sink.Add(docker.SnapshotMetaName, "json", bytes.NewReader(mb))
	err := f.p.CheckRestore(ctxT(t), f.acct, dirSource{sink})
	if !core.IsKind(err, core.KindConflict) || !strings.Contains(err.Error(), "no longer at the Docker Engine") {
		t.Fatalf("check restore with the image gone: %v", err)
	}
	_, err = f.p.Restore(ctxT(t), f.acct, core.RestoreSpec{WorkspaceID: "ws_x", Name: "x"}, dirSource{sink})
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Kind != core.KindConflict {
		t.Fatalf("restore with the image gone: %v", err)
	}
	// Malformed docker.json.
	bad := &dirSink{dir: t.TempDir()}
	bad.Add(docker.SnapshotMetaName, "json", strings.NewReader("{not json"))
	if err := f.p.CheckRestore(ctxT(t), f.acct, dirSource{bad}); !core.IsKind(err, core.KindInvalid) {
		t.Fatalf("check restore of malformed docker.json: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestRestoreDeletesWhatTheBoxDeleted: a file of the image that the box
// deleted is listed in docker.json and gone from the restored box (rm in
// the box). A deleted path rm cannot remove leaves the restore standing,
// with a warning that names it.
func TestRestoreDeletesWhatTheBoxDeleted(t *testing.T) {
	f := newFixture(t, docker.Config{})
	ctx := ctxT(t)
	b := f.create("ws_del", nil)
	if code, out, err := dockertest.Exec(ctx, f.cli, b.ID, "rm", boximage.ImageFile); err != nil || code != 0 {
		t.Fatalf("rm %s in the box: %d %q %v", boximage.ImageFile, code, out, err)
	}
	sink := &dirSink{dir: t.TempDir()}
	if err := f.p.Snapshot(ctx, f.acct, b.ID, sink); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	metaPath := filepath.Join(sink.dir, docker.SnapshotMetaName)
	metaBytes, _ := os.ReadFile(metaPath)
	var meta docker.SnapshotMeta
	if err := json.Unmarshal(metaBytes, &meta); err != nil {
		t.Fatal(err)
	}
	if !contains(meta.Layer.Deleted, boximage.ImageFile) {
		t.Fatalf("docker.json's deleted paths %v lack %s", meta.Layer.Deleted, boximage.ImageFile)
	}
	if err := f.p.Delete(ctx, f.acct, b.ID); err != nil {
		t.Fatal(err)
	}
	src := dirSource{sink}
	nb, err := f.p.Restore(ctx, f.acct, core.RestoreSpec{WorkspaceID: "ws_del_back", Name: "back", AgentKey: "k1"}, src)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got, err := readFile(t, f.cli, nb.ID, boximage.ImageFile); err == nil {
		t.Fatalf("the restored box has %s again: %q", boximage.ImageFile, got)
	}
	// A restore resumed after it started the box (companion stopped
	// before the deletions) deletes them then.
	putFile(t, f.cli, nb.ID, path.Dir(boximage.ImageFile), path.Base(boximage.ImageFile), boximage.ImageFileContent)
	if again, err := f.p.Restore(ctx, f.acct, core.RestoreSpec{WorkspaceID: "ws_del_back", Name: "back", AgentKey: "k1"}, src); err != nil || again.ID != nb.ID {
		t.Fatalf("resumed restore: %+v, %v; want box %s", again, err, nb.ID)
	}
	if got, err := readFile(t, f.cli, nb.ID, boximage.ImageFile); err == nil {
		t.Fatalf("a resumed restore left %s in the box: %q", boximage.ImageFile, got)
	}
	if strings.Contains(f.logs.String(), "rm in the box failed") {
		t.Fatalf("a warning about deleting, though it worked:\n%s", f.logs.String())
	}

	// A path no rm can remove (the kernel's): the box is restored anyway.
	meta.Layer.Deleted = append(meta.Layer.Deleted, "/proc/1")
	metaBytes, _ = json.Marshal(meta)
	os.WriteFile(metaPath, metaBytes, 0o600)
	sum := sha256.Sum256(metaBytes)
	for i, fl := range sink.files {
		if fl.Name == docker.SnapshotMetaName {
			sink.files[i].SHA256, sink.files[i].Bytes = hex.EncodeToString(sum[:]), int64(len(metaBytes))
		}
	}
	again, err := f.p.Restore(ctx, f.acct, core.RestoreSpec{WorkspaceID: "ws_del_again", Name: "again", AgentKey: "k2"}, src)
	if err != nil || again.State != core.StateRunning {
		t.Fatalf("restore with an undeletable path: %+v, %v; want a running box", again, err)
	}
	if logs := f.logs.String(); !strings.Contains(logs, "rm in the box failed") || !strings.Contains(logs, "/proc/1") {
		t.Fatalf("no warning naming the path rm could not delete:\n%s", logs)
	}
}
