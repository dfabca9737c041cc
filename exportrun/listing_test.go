package exportrun

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestListScriptWithThisMachinesShell runs the listing script with
// /bin/sh, as the agent-server does, in a directory holding every kind
// of entry, and reads what it prints.
func TestListScriptWithThisMachinesShell(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(dir, "d ir"), 0o755))
	must(os.Mkdir(filepath.Join(dir, ".hidden"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "naïve notes.txt"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(dir, ".env"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "..dots"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "run.sh"), []byte("x"), 0o755))
	must(os.Symlink("naïve notes.txt", filepath.Join(dir, "link")))
	must(os.Symlink("d ir", filepath.Join(dir, "dirlink"))) // a link, not a directory
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	cmd := exec.Command("/bin/sh", "-c", listScript)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseListing(string(out))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got {
		names = append(names, string(e.typ)+" "+e.name)
	}
	slices.Sort(names)
	want := []string{"d .hidden", "d d ir", "f ..dots", "f .env", "f naïve notes.txt", "l dirlink", "l link", "o fifo", "x run.sh"}
	if !slices.Equal(names, want) {
		t.Errorf("listing:\n got %q\nwant %q", names, want)
	}

	cmd = exec.Command("/bin/sh", "-c", listScript)
	cmd.Dir = t.TempDir()
	out, err = cmd.Output()
	if got, perr := parseListing(string(out)); err != nil || perr != nil || len(got) != 0 {
		t.Errorf("empty directory: %v %v %v", got, err, perr)
	}
}

// TestParseListingRefusesPartialOrGarbled: an answer cut to its last
// chunk, a count that disagrees, a name upstream could not decode, or a
// record it cannot read is an error, never a shorter listing.
func TestParseListingRefusesPartialOrGarbled(t *testing.T) {
	for name, out := range map[string]string{
		"no end":        "f a\x00",
		"cut start":     "ile\x00f b\x00end 2\x00",
		"count differs": "f a\x00end 2\x00",
		"replacement":   "f caf\uFFFD\x00end 1\x00",
		"slash":         "f a/b\x00end 1\x00",
		"unknown type":  "q a\x00end 1\x00",
		"no NUL at end": "f a\x00end 1",
		"empty":         "",
	} {
		if got, err := parseListing(out); err == nil {
			t.Errorf("%s: parsed as %v", name, got)
		}
	}
	got, err := parseListing("f a b\x00d c\x00end 2\x00")
	if err != nil || len(got) != 2 || got[0].name != "a b" || got[1].typ != 'd' {
		t.Errorf("%v %v", got, err)
	}
}
