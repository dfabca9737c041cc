package exports

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// An export root on a disk that is not mounted is an empty directory on
// the disk below: writing there fills the wrong disk, and the exports
// vanish from view when the disk comes back. Two checks, before every
// export, tell it apart from a root that is merely new:
//
//   - The marker: at first use companion writes MarkerName in the root,
//     and remembers it outside the root (Writer.MarkerRecord, in the data
//     dir). A root without the marker it remembers is refused.
//   - /etc/fstab (Linux): a root listed there as a mount point but absent
//     from /proc/self/mountinfo is refused, even at first use.

// MarkerName is the file companion writes in an export root at first use.
const MarkerName = ".companion-export-root"

// markerRecord is what the data dir remembers of the marker.
type markerRecord struct {
	Root      string    `json:"root"`
	Marker    string    `json:"marker"`
	WrittenAt time.Time `json:"written_at"`
}

// checkRoot refuses a root that looks like a disk that is not mounted,
// and writes the marker at first use.
func (w *Writer) checkRoot() error {
	w.markerMu.Lock()
	defer w.markerMu.Unlock()
	if err := w.checkFstab(); err != nil || w.MarkerRecord == "" {
		return err
	}
	marker := filepath.Join(w.Root, MarkerName)
	raw, err := os.ReadFile(marker)
	switch {
	case err == nil:
		return w.remember(strings.TrimSpace(string(raw)))
	case !errors.Is(err, os.ErrNotExist):
		return classify(fmt.Errorf("export: read %s: %w", marker, err))
	}
	if rec, ok := w.recalled(); ok {
		return classified{fmt.Errorf("export: root %s has lost the marker companion wrote there at %s (%s): "+
			"a disk that is not mounted looks like this. Mount it and try again; if the location was emptied on purpose, "+
			"delete %s and companion starts afresh there",
			w.Root, rec.WrittenAt.Format(time.RFC3339), MarkerName, w.MarkerRecord), ErrMissing}
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	if err := writeSynced(marker, []byte(id+"\n")); err != nil {
		return classify(fmt.Errorf("export: write %s: %w", marker, err))
	}
	return w.remember(id)
}

// recalled is the record of the marker written in this root, if any.
func (w *Writer) recalled() (markerRecord, bool) {
	if w.MarkerRecord == "" {
		return markerRecord{}, false
	}
	raw, err := os.ReadFile(w.MarkerRecord)
	if err != nil {
		return markerRecord{}, false
	}
	var rec markerRecord
	if json.Unmarshal(raw, &rec) != nil || rec.Root != w.Root || rec.Marker == "" {
		return markerRecord{}, false
	}
	return rec, true
}

// remember records marker id as this root's, unless it is already.
func (w *Writer) remember(id string) error {
	if w.MarkerRecord == "" {
		return nil
	}
	if rec, ok := w.recalled(); ok && rec.Marker == id {
		return nil
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	raw, _ := json.Marshal(markerRecord{Root: w.Root, Marker: id, WrittenAt: now().UTC()})
	if err := writeSynced(w.MarkerRecord, raw); err != nil {
		return fmt.Errorf("export: remember the export root's marker in %s: %w", w.MarkerRecord, err)
	}
	return nil
}

// writeSynced writes path whole through a temporary file and a rename.
func writeSynced(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// checkFstab refuses a root that /etc/fstab mounts but that is not
// mounted now.
func (w *Writer) checkFstab() error {
	if runtime.GOOS != "linux" {
		return nil
	}
	fstab, mountinfo := "/etc/fstab", "/proc/self/mountinfo"
	if w.fstab != "" {
		fstab, mountinfo = w.fstab, w.mountinfo
	}
	root := filepath.Clean(w.Root)
	if !hasField(fstab, 1, root) {
		return nil
	}
	if hasField(mountinfo, 4, root) {
		return nil
	}
	return classified{fmt.Errorf("export: root %s is a mount point in %s but nothing is mounted there now; mount it and try again", w.Root, fstab), ErrMissing}
}

// hasField reports whether a line of file (not a comment) has want as
// its field n (0-based, space separated, octal escapes as in fstab and
// mountinfo).
func hasField(file string, n int, want string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) > n && filepath.Clean(unescapeOctal(fields[n])) == want {
			return true
		}
	}
	return false
}

// unescapeOctal undoes fstab's and mountinfo's \040-style escapes.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + (c - '0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
