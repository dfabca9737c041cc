package exports

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)

func newWriter(root string) *Writer {
	return &Writer{Root: root, Now: func() time.Time { return t0 }}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// pattern is a deterministic, incompressible-enough byte stream of n bytes
// that is never materialized.
func pattern(n int64) io.Reader {
	return io.LimitReader(&patternReader{}, n)
}

type patternReader struct{ i uint32 }

func (p *patternReader) Read(b []byte) (int, error) {
	for k := range b {
		p.i = p.i*1664525 + 1013904223
		b[k] = byte(p.i >> 24)
	}
	return len(b), nil
}

// entries lists what is under dir, recursively, as relative paths.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	return out
}

func TestCommitWritesVerifiedExport(t *testing.T) {
	root := t.TempDir()
	w := newWriter(root)
	ex, err := w.Begin("ws-1", "box-9")
	if err != nil {
		t.Fatal(err)
	}
	traj := []byte("PK fake zip bytes")
	if _, err := ex.Add(File{Name: "c1.zip", Kind: KindTrajectory, ConversationID: "c1"}, bytes.NewReader(traj)); err != nil {
		t.Fatal(err)
	}
	f, err := ex.Add(File{Name: "repo.tar.gz", Kind: KindArchive, Format: "tar.gz", Branch: "main",
		Remote: "https://example.invalid/r.git", HeadCommit: "abc"}, pattern(3<<20+17))
	if err != nil {
		t.Fatal(err)
	}
	if f.Bytes != 3<<20+17 {
		t.Fatalf("bytes = %d", f.Bytes)
	}
	if _, err := ex.Add(File{Name: "repo.patch", Kind: KindArchive, Format: "git-delta", BaseCommit: "def"},
		strings.NewReader("diff --git a/x b/x\n")); err != nil {
		t.Fatal(err)
	}
	m, dir, err := ex.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "ws-1", ex.ID()); dir != want {
		t.Fatalf("dir = %s, want %s", dir, want)
	}
	if !strings.HasPrefix(ex.ID(), "20261201T070000Z-") {
		t.Fatalf("id %q does not start with the time", ex.ID())
	}
	got := entries(t, filepath.Join(root, "ws-1"))
	want := []string{ex.ID(), filepath.Join(ex.ID(), "c1.zip"), filepath.Join(ex.ID(), "manifest.json"),
		filepath.Join(ex.ID(), "repo.patch"), filepath.Join(ex.ID(), "repo.tar.gz")}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("export holds %v, want %v (no temp or staging files)", got, want)
	}
	var onDisk Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &onDisk); err != nil {
		t.Fatal(err)
	}
	if !onDisk.Verified || onDisk.WorkspaceID != "ws-1" || onDisk.BoxID != "box-9" || len(onDisk.Files) != 3 ||
		onDisk.ConversationIDs[0] != "c1" || onDisk.BaseCommit != "def" || onDisk.Branch != "main" ||
		onDisk.Remote != "https://example.invalid/r.git" || !onDisk.CreatedAt.Equal(t0) {
		t.Fatalf("manifest on disk: %s", b)
	}
	if onDisk.Bytes != m.Bytes || m.Bytes != int64(len(traj))+3<<20+17+19 {
		t.Fatalf("bytes: disk %d, returned %d", onDisk.Bytes, m.Bytes)
	}
	if onDisk.Files[0].SHA256 != sum(traj) {
		t.Fatalf("trajectory sha256 %s, want %s", onDisk.Files[0].SHA256, sum(traj))
	}
	if _, err := VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
	// A file changed after the fact is caught by a later re-check.
	if err := os.WriteFile(filepath.Join(dir, "c1.zip"), []byte("PK fake zip bytez"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyDir(dir); !errors.Is(err, ErrMismatch) {
		t.Fatalf("VerifyDir after tampering: %v, want ErrMismatch", err)
	}
}

// corrupter flips one byte at offset at on its way to disk.
type corrupter struct {
	w   io.Writer
	off int64
	at  int64
}

func (c *corrupter) Write(b []byte) (int, error) {
	if c.at >= c.off && c.at < c.off+int64(len(b)) {
		b = bytes.Clone(b)
		b[c.at-c.off] ^= 0xff
	}
	c.off += int64(len(b))
	return c.w.Write(b)
}

func TestReadBackMismatchBlocks(t *testing.T) {
	// One byte flipped on its way to disk: in a small file, and in a file
	// long enough that it is read back in several fsynced stretches, in a
	// later stretch.
	for _, c := range []struct{ size, at int64 }{{1 << 20, 100_000}, {3*syncEvery + 5, 2*syncEvery + 7}} {
		root := t.TempDir()
		w := newWriter(root)
		w.wrapFile = func(dst io.Writer) io.Writer { return &corrupter{w: dst, at: c.at} }
		ex, err := w.Begin("ws-1", "box")
		if err != nil {
			t.Fatal(err)
		}
		_, err = ex.Add(File{Name: "a.tar.gz", Kind: KindArchive}, pattern(c.size))
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "a.tar.gz") {
			t.Fatalf("size %d: Add = %v, want a read-back mismatch naming a.tar.gz", c.size, err)
		}
		if _, _, err := ex.Commit(); err == nil {
			t.Fatal("Commit after a mismatch succeeded")
		}
		if left := entries(t, filepath.Join(root, "ws-1")); len(left) != 0 {
			t.Fatalf("a failed export left %v", left)
		}
	}
}

func TestLargeFileReadBackInStretches(t *testing.T) {
	root := t.TempDir()
	ex, err := newWriter(root).Begin("ws-1", "box")
	if err != nil {
		t.Fatal(err)
	}
	size := int64(3*syncEvery + 12345)
	h := sha256.New()
	if _, err := io.Copy(h, pattern(size)); err != nil {
		t.Fatal(err)
	}
	f, err := ex.Add(File{Name: "big.tar.gz", Kind: KindArchive}, pattern(size))
	if err != nil {
		t.Fatal(err)
	}
	if f.Bytes != size || f.SHA256 != hex.EncodeToString(h.Sum(nil)) {
		t.Fatalf("recorded %d %s", f.Bytes, f.SHA256)
	}
	_, dir, err := ex.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
}

func TestReadBackReaderMismatchBlocks(t *testing.T) {
	root := t.TempDir()
	w := newWriter(root)
	w.openRead = func(p string) (io.ReadCloser, error) {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		// The read-back sees one byte short: a truncated file.
		st, _ := f.Stat()
		return struct {
			io.Reader
			io.Closer
		}{io.LimitReader(f, st.Size()-1), f}, nil
	}
	ex, err := w.Begin("ws-1", "box")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Add(File{Name: "c.zip", Kind: KindTrajectory, ConversationID: "c"}, strings.NewReader("hello")); !errors.Is(err, ErrMismatch) {
		t.Fatalf("Add = %v, want ErrMismatch", err)
	}
	if _, _, err := ex.Commit(); err == nil {
		t.Fatal("Commit after a mismatch succeeded")
	}
	if left := entries(t, filepath.Join(root, "ws-1")); len(left) != 0 {
		t.Fatalf("a failed export left %v", left)
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(b []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("connection reset by box")
	}
	n := min(len(b), f.n)
	f.n -= n
	return n, nil
}

func TestSourceFailureMidStreamLeavesNothing(t *testing.T) {
	root := t.TempDir()
	ex, err := newWriter(root).Begin("ws-1", "box")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ex.Add(File{Name: "a.tar.gz", Kind: KindArchive}, &failingReader{n: 70_000})
	if err == nil || !strings.Contains(err.Error(), "connection reset by box") || !strings.Contains(err.Error(), "a.tar.gz") {
		t.Fatalf("Add = %v", err)
	}
	if _, _, err := ex.Commit(); err == nil {
		t.Fatal("Commit after a failed Add succeeded")
	}
	if left := entries(t, filepath.Join(root, "ws-1")); len(left) != 0 {
		t.Fatalf("a failed export left %v", left)
	}
}

func TestBadNamesRefused(t *testing.T) {
	root := t.TempDir()
	w := newWriter(root)
	if _, err := w.Begin("../escape", "box"); err == nil {
		t.Fatal("Begin accepted a workspace id with a path separator")
	}
	for _, name := range []string{"../x", "manifest.json", ".hidden", ""} {
		ex, err := w.Begin("ws", "box")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ex.Add(File{Name: name}, strings.NewReader("x")); err == nil {
			t.Fatalf("Add accepted name %q", name)
		}
	}
	if left := entries(t, filepath.Join(root, "ws")); len(left) != 0 {
		t.Fatalf("refused exports left %v", left)
	}
}

func TestUnwritableRootIsClearError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := newWriter(filepath.Join(file, "exports")).Begin("ws", "box")
	if !errors.Is(err, ErrUnwritable) || !strings.Contains(err.Error(), "not-a-dir") {
		t.Fatalf("Begin under a file = %v, want ErrUnwritable naming the path", err)
	}

	if _, err := newWriter(file).Begin("ws", "box"); !errors.Is(err, ErrUnwritable) {
		t.Fatalf("Begin with a file as root = %v, want ErrUnwritable", err)
	}
	missing := filepath.Join(t.TempDir(), "unmounted", "exports")
	if _, err := newWriter(missing).Begin("ws", "box"); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Begin with a missing root = %v, want ErrMissing naming it", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("Begin created the missing root")
	}

	// A read-only filesystem: refused even for root.
	ro := mountTmpfs(t, "ro,size=1m")
	_, err = newWriter(ro).Begin("ws", "box")
	if !errors.Is(err, ErrUnwritable) {
		t.Fatalf("Begin on a read-only filesystem = %v, want ErrUnwritable", err)
	}
}

func TestDiskFullBlocks(t *testing.T) {
	root := mountTmpfs(t, "size=1m")
	ex, err := newWriter(root).Begin("ws-1", "box")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ex.Add(File{Name: "big.tar.gz", Kind: KindArchive}, pattern(4<<20))
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "big.tar.gz") {
		t.Fatalf("Add on a full disk = %v, want ErrNoSpace naming the file", err)
	}
	t.Logf("error text: %v", err)
	if _, _, err := ex.Commit(); err == nil {
		t.Fatal("Commit after a full disk succeeded")
	}
	if left := entries(t, filepath.Join(root, "ws-1")); len(left) != 0 {
		t.Fatalf("a failed export left %v", left)
	}
	// The space is given back: a small export fits afterwards.
	ex, err = newWriter(root).Begin("ws-1", "box")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Add(File{Name: "small.zip", Kind: KindTrajectory, ConversationID: "c"}, pattern(200_000)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ex.Commit(); err != nil {
		t.Fatal(err)
	}
}

// mountTmpfs mounts a real tmpfs with opts on a fresh directory, or skips
// the test saying why when this machine cannot (not root, no mount).
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a small tmpfs needs root; run as root to test a real full/read-only filesystem")
	}
	if _, err := exec.LookPath("mount"); err != nil {
		t.Skip("skipping: no mount binary to create a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipping: cannot mount a tmpfs here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

func TestRemovePartial(t *testing.T) {
	root := t.TempDir()
	w := newWriter(root)
	done, err := w.Begin("ws-1", "box")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := done.Add(File{Name: "c.zip", Kind: KindTrajectory, ConversationID: "c"}, strings.NewReader("z")); err != nil {
		t.Fatal(err)
	}
	_, dir, err := done.Commit()
	if err != nil {
		t.Fatal(err)
	}
	// Two exports a crash interrupted: one empty, one mid-file.
	for _, ws := range []string{"ws-1", "ws-2"} {
		ex, err := w.Begin(ws, "box")
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(root, ws, "."+ex.ID()+".partial", ".a.tar.gz.tmp-1"), []byte("half"), 0o600)
	}
	n, bytes, err := w.RemovePartial()
	if err != nil || n != 2 || bytes != int64(len("half"))*2 {
		t.Fatalf("RemovePartial = %d, %d bytes, %v; want 2, 8 bytes", n, bytes, err)
	}
	if got := entries(t, root); strings.Join(got, ",") != strings.Join([]string{"ws-1", filepath.Join("ws-1", filepath.Base(dir)),
		filepath.Join("ws-1", filepath.Base(dir), "c.zip"), filepath.Join("ws-1", filepath.Base(dir), "manifest.json"), "ws-2"}, ",") {
		t.Fatalf("after RemovePartial: %v", got)
	}
	if _, err := VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
}

// TestPartialsCarryTheirRecord: a staging directory begun for a record
// names it, Partials lists it (of one workspace or all) with the record,
// Remove counts its bytes, and a committed export is no partial any more
// (Remove of its old staging path leaves the final directory alone).
func TestPartialsCarryTheirRecord(t *testing.T) {
	root := t.TempDir()
	w := newWriter(root)
	if _, err := w.BeginRecord("ws-1", "box", "exp.bad"); err == nil {
		t.Fatal("a record id with a dot was accepted")
	}
	if _, err := os.Stat(filepath.Join(root, "ws-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused record id left a workspace directory behind: %v", err)
	}
	live, err := w.BeginRecord("ws-1", "box", "exp_a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.Add(File{Name: "a.tar.gz", Kind: KindArchive}, strings.NewReader("12345")); err != nil {
		t.Fatal(err)
	}
	old, err := w.Begin("ws-2", "box")
	if err != nil {
		t.Fatal(err)
	}
	done, err := w.BeginRecord("ws-2", "box", "exp_b")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := w.Partials("")
	if err != nil || len(ps) != 3 {
		t.Fatalf("Partials = %+v, %v; want 3", ps, err)
	}
	var doneStaging Partial
	for _, p := range ps {
		switch {
		case p.WorkspaceID == "ws-1" && p.Record == "exp_a":
		case p.WorkspaceID == "ws-2" && p.Record == "" && strings.Contains(p.Dir, old.ID()):
		case p.WorkspaceID == "ws-2" && p.Record == "exp_b":
			doneStaging = p
		default:
			t.Errorf("unexpected partial %+v", p)
		}
	}
	if ps, err := w.Partials("ws-1"); err != nil || len(ps) != 1 || ps[0].Record != "exp_a" {
		t.Fatalf("Partials(ws-1) = %+v, %v", ps, err)
	}
	if _, err := done.Add(File{Name: "c.zip", Kind: KindTrajectory}, strings.NewReader("z")); err != nil {
		t.Fatal(err)
	}
	_, final, err := done.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := doneStaging.Remove(); err != nil || n != 0 {
		t.Fatalf("Remove of a committed export's staging path = %d, %v; want 0, nil", n, err)
	}
	if _, err := VerifyDir(final); err != nil {
		t.Fatalf("the committed export: %v", err)
	}
	ps, _ = w.Partials("ws-1")
	if n, err := ps[0].Remove(); err != nil || n != 5 {
		t.Fatalf("Remove = %d, %v; want 5 bytes", n, err)
	}
	if ps, _ := w.Partials(""); len(ps) != 1 || ps[0].Record != "" {
		t.Fatalf("left %+v, want only the unmarked one", ps)
	}
}
