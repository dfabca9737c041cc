package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestRm: the box's rm removes trees with -r only, and refuses a missing
// path unless -f, going on with the other paths either way.
func TestRm(t *testing.T) {
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	file := filepath.Join(dir, "file")
	os.MkdirAll(filepath.Join(tree, "deep"), 0o755)
	os.WriteFile(filepath.Join(tree, "deep", "x"), []byte("x"), 0o644)
	os.WriteFile(file, []byte("y"), 0o644)
	missing := filepath.Join(dir, "missing")

	if code := rm([]string{tree}, io.Discard); code != 1 {
		t.Errorf("rm of a directory without -r: exit %d, want 1", code)
	}
	if _, err := os.Stat(tree); err != nil {
		t.Fatalf("rm without -r removed the directory: %v", err)
	}
	if code := rm([]string{missing, file}, io.Discard); code != 1 {
		t.Errorf("rm of a missing path without -f: exit %d, want 1", code)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("rm did not go on to the next path: %v", err)
	}
	if code := rm([]string{"-rf", "--", missing, tree}, io.Discard); code != 0 {
		t.Errorf("rm -rf -- missing tree: exit %d, want 0", code)
	}
	if _, err := os.Stat(tree); !os.IsNotExist(err) {
		t.Errorf("rm -rf left the tree: %v", err)
	}
	if code := rm([]string{"-x", file}, io.Discard); code != 1 {
		t.Errorf("rm with an unknown option: exit %d, want 1 (GNU rm's usage error)", code)
	}
}
