package exports

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoveOnlyCommittedExportsUnderRoot: Remove deletes a committed
// export and nothing else: not the root, not a workspace directory, not
// a staging directory, not a path outside the root, not a symlink.
func TestRemoveOnlyCommittedExportsUnderRoot(t *testing.T) {
	w := &Writer{Root: t.TempDir()}
	commit := func() string {
		e, err := w.BeginRecord("ws1", "box", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Add(File{Name: "a.zip", Kind: "trajectory"}, strings.NewReader("kept work")); err != nil {
			t.Fatal(err)
		}
		_, dir, err := e.Commit()
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir := commit()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "precious"), []byte("x"), 0o600)
	link := filepath.Join(w.Root, "ws1", "link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	staging, err := w.BeginRecord("ws1", "box", "rec1")
	if err != nil {
		t.Fatal(err)
	}
	defer staging.Abort()
	for _, bad := range []string{w.Root, filepath.Join(w.Root, "ws1"), outside, filepath.Join(w.Root, "ws1", "..", "..", filepath.Base(outside)),
		staging.staging, link} {
		if _, err := w.Remove(bad); err == nil {
			t.Errorf("Remove(%s) succeeded", bad)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "precious")); err != nil {
		t.Fatal("a file outside the root was removed")
	}
	if _, err := VerifyDir(dir); err != nil {
		t.Fatalf("the export was harmed by refused removals: %v", err)
	}
	n, err := w.Remove(dir)
	if err != nil || n == 0 {
		t.Fatalf("Remove: %d bytes, %v", n, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("export directory still there: %v", err)
	}
	if n, err := w.Remove(dir); err != nil || n != 0 {
		t.Fatalf("removing again: %d, %v; want nothing and no error", n, err)
	}
}
