package exports

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// markedWriter is a writer whose marker record lives in its own dir,
// with empty fstab and mountinfo files.
func markedWriter(t *testing.T, root string) *Writer {
	t.Helper()
	etc := t.TempDir()
	w := newWriter(root)
	w.MarkerRecord = filepath.Join(etc, "export-root.json")
	w.fstab, w.mountinfo = filepath.Join(etc, "fstab"), filepath.Join(etc, "mountinfo")
	for _, f := range []string{w.fstab, w.mountinfo} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func exportOnce(w *Writer) error {
	e, err := w.BeginRecord("ws-1", "box-1", "")
	if err != nil {
		return err
	}
	if _, err := e.Add(File{Name: "a.txt", Kind: KindArchive}, strings.NewReader("a")); err != nil {
		e.Abort()
		return err
	}
	_, _, err = e.Commit()
	return err
}

// TestMarkerRefusesARootThatLostIt: the first export writes the marker
// and the record; a root swapped for an empty directory (a disk that is
// not mounted any more) is refused, with nothing written into it; a
// record removed on purpose starts afresh.
func TestMarkerRefusesARootThatLostIt(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "mnt")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	w := markedWriter(t, root)
	if err := exportOnce(w); err != nil {
		t.Fatal(err)
	}
	marker, err := os.ReadFile(filepath.Join(root, MarkerName))
	if err != nil || len(strings.TrimSpace(string(marker))) != 16 {
		t.Fatalf("marker %q, %v", marker, err)
	}
	if rec, ok := w.recalled(); !ok || rec.Marker != strings.TrimSpace(string(marker)) {
		t.Fatalf("record %+v, %v; want the marker", rec, ok)
	}
	if err := exportOnce(w); err != nil {
		t.Fatalf("second export with the marker in place: %v", err)
	}

	// "Unmounted": the disk's directory moves away, an empty one is left.
	if err := os.Rename(root, filepath.Join(base, "disk")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	err = exportOnce(w)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "not mounted") || !strings.Contains(err.Error(), w.MarkerRecord) {
		t.Fatalf("export into the empty mount point: %v; want ErrMissing saying not mounted and naming the record", err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("the empty mount point was written to: %v", ents)
	}

	// Emptied on purpose: the person deletes the record.
	if err := os.Remove(w.MarkerRecord); err != nil {
		t.Fatal(err)
	}
	if err := exportOnce(w); err != nil {
		t.Fatalf("after the record was removed: %v", err)
	}
}

// TestMarkerFollowsAnotherCompanionsMarker: a data dir with no record (a
// new one, or another replica's) takes the marker it finds; a record of
// another root does not count.
func TestMarkerFollowsAnotherCompanionsMarker(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, MarkerName), []byte("0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := markedWriter(t, root)
	if err := exportOnce(w); err != nil {
		t.Fatal(err)
	}
	if rec, ok := w.recalled(); !ok || rec.Marker != "0123456789abcdef" {
		t.Fatalf("record %+v, %v; want the marker found", rec, ok)
	}

	other := markedWriter(t, t.TempDir())
	other.MarkerRecord = w.MarkerRecord // remembers root's marker, not its own root's
	if err := exportOnce(other); err != nil {
		t.Fatalf("a record of another root refused a new one: %v", err)
	}
}

// TestFstabMountPointNotMounted: a root /etc/fstab mounts is refused
// until mountinfo lists it, even at first use.
func TestFstabMountPointNotMounted(t *testing.T) {
	root := filepath.Join(t.TempDir(), "backup disk")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	w := markedWriter(t, root)
	escaped := strings.ReplaceAll(root, " ", `\040`)
	if err := os.WriteFile(w.fstab, []byte("# comment\nUUID=1234 "+escaped+" ext4 defaults 0 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := exportOnce(w)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "mount point") {
		t.Fatalf("export to an fstab mount point that is not mounted: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(root, MarkerName)); !os.IsNotExist(serr) {
		t.Fatal("a marker was written to the unmounted mount point")
	}
	line := "36 35 98:0 / " + escaped + " rw,noatime master:1 - ext4 /dev/sdb1 rw\n"
	if err := os.WriteFile(w.mountinfo, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := exportOnce(w); err != nil {
		t.Fatalf("mounted: %v", err)
	}
}
