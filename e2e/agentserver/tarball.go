package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// manifestName is the member upstream adds to every tar.gz, at the root.
const manifestName = "archive_manifest.json"

// tarball writes the tar.gz format of the archive route the way upstream's
// _create_tar_gz_archive does with Python's tarfile:
//   - a walk of root that follows no symlink: excluded directories and the
//     credential-bearing git internals are pruned, every other directory
//     (root included) gets a member of its own, so empty ones round-trip;
//   - regular files only (symlinks, fifos, devices are skipped; a symlink
//     to a directory is neither archived nor descended), each sized from
//     its open descriptor and padded with NULs if it shrinks meanwhile;
//     a second name of a hard-linked file is a link member;
//   - then <name>/archive_manifest.json, unless the workspace has its own
//     file there, which is kept instead.
//
// Members are PAX tar as tarfile writes them (mode, owner ids and names,
// mtime with its fraction) in a gzip stream at level 9 whose header names
// the temporary file; the tar is padded to tarfile's 10240-byte records.
// Members come in the order os.walk gives: each directory's entries in
// the order the file system lists them.
type tarball struct {
	root     string // host path of the directory archived
	name     string // its base name as the box sees it ("" for the box's "/")
	excludes []string
	log      *slog.Logger

	tw        *tar.Writer
	links     map[[2]uint64]string
	files     int
	bytes     int64
	collision bool
}

func (t *tarball) write(out *os.File) error {
	gz, err := gzip.NewWriterLevel(out, gzip.BestCompression)
	if err != nil {
		return err
	}
	gz.Name = strings.TrimSuffix(filepath.Base(out.Name()), ".gz")
	gz.ModTime = time.Now()
	cw := &countingWriter{w: gz}
	t.tw = tar.NewWriter(cw)
	t.links = map[[2]uint64]string{}
	if err := t.walk(t.root, nil); err != nil {
		return err
	}
	if t.collision {
		t.log.Warn("the workspace has its own archive manifest; keeping it and writing none", "root", t.root)
	} else if err := t.manifest(); err != nil {
		return err
	}
	if err := t.tw.Close(); err != nil {
		return err
	}
	// tarfile pads the archive to whole records of 20 blocks.
	if pad := (10240 - cw.n%10240) % 10240; pad > 0 {
		if _, err := cw.Write(make([]byte, pad)); err != nil {
			return err
		}
	}
	return gz.Close()
}

// readDirUnsorted lists a directory in the file system's own order, as
// os.scandir does (os.ReadDir would sort by name).
func readDirUnsorted(dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// arcname is the member name of the path with these parts, as tarfile
// stores it (no leading "/").
func (t *tarball) arcname(parts []string) string {
	return strings.TrimLeft(strings.Join(append([]string{t.name}, parts...), "/"), "/")
}

// walk archives dir (whose parts below the root are rel), top-down as
// os.walk does: the directory's own member, its files, then the
// subdirectories that survive pruning. A directory that cannot be read
// is skipped whole, member included.
func (t *tarball) walk(dir string, rel []string) error {
	entries, err := readDirUnsorted(dir)
	if err != nil {
		t.log.Warn("skipping unreadable directory", "dir", dir, "err", err)
		return nil
	}
	var dirs, files []string
	for _, e := range entries {
		// os.walk sorts entries with is_dir(), which follows symlinks.
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			fi, err := os.Stat(filepath.Join(dir, e.Name()))
			isDir = err == nil && fi.IsDir()
		}
		if !isDir {
			files = append(files, e.Name())
			continue
		}
		parts := append(append([]string(nil), rel...), e.Name())
		if !pathExcluded(parts, t.excludes, true) && !sensitiveGit(parts) {
			dirs = append(dirs, e.Name())
		}
	}
	if err := t.dirMember(dir, rel); err != nil {
		return err
	}
	for _, name := range files {
		parts := append(append([]string(nil), rel...), name)
		if pathExcluded(parts, t.excludes, false) || sensitiveGit(parts) {
			continue
		}
		if err := t.fileMember(filepath.Join(dir, name), parts); err != nil {
			return err
		}
	}
	for _, name := range dirs {
		p := filepath.Join(dir, name)
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			continue // os.walk(followlinks=False) does not descend symlinks
		}
		if err := t.walk(p, append(append([]string(nil), rel...), name)); err != nil {
			return err
		}
	}
	return nil
}

func (t *tarball) dirMember(dir string, rel []string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		t.log.Warn("skipping unreadable directory", "dir", dir, "err", err)
		return nil
	}
	hdr, err := t.header(fi, t.arcname(rel)+"/")
	if err != nil {
		return err
	}
	return t.tw.WriteHeader(hdr)
}

// fileMember adds one regular file. A file that cannot be opened, or is
// no longer a regular file, is skipped (the workspace may be changing).
func (t *tarball) fileMember(p string, parts []string) error {
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		t.log.Warn("skipping unreadable file", "file", p, "err", err)
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	arc := t.arcname(parts)
	hdr, err := t.header(fi, arc)
	if err != nil {
		return err
	}
	if dev, ino, nlink, ok := inode(fi); ok {
		key := [2]uint64{dev, ino}
		if first, seen := t.links[key]; seen && nlink > 1 && first != arc {
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
		} else if ino != 0 {
			t.links[key] = arc
		}
	}
	if err := t.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if err := copyExactly(t.tw, f, hdr.Size); err != nil {
		return fmt.Errorf("archive %s: %w", p, err)
	}
	if arc == t.arcname([]string{manifestName}) {
		t.collision = true
	}
	t.files++
	t.bytes += hdr.Size
	return nil
}

// header is tarfile's member for fi: PAX format, so the fractional mtime
// survives; no access or change times (tarfile stores neither).
func (t *tarball) header(fi fs.FileInfo, name string) (*tar.Header, error) {
	hdr, err := tar.FileInfoHeader(fi, "")
	if err != nil {
		return nil, err
	}
	hdr.Name = name
	hdr.Format = tar.FormatPAX
	hdr.ModTime = pyMtime(hdr.ModTime)
	hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
	return hdr, nil
}

// pyMtime is the mtime tarfile records: st_mtime, a float, written with
// repr(), so only about 100 ns of the fraction survive.
func pyMtime(t time.Time) time.Time {
	f := float64(t.Unix()) + float64(t.Nanosecond())*1e-9
	sec, frac, _ := strings.Cut(pyFloatRepr(f), ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	ns, err2 := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	if err1 != nil || err2 != nil {
		return t
	}
	return time.Unix(s, ns)
}

// copyExactly copies size bytes of r: a short file is padded with NULs
// and a grown one cut, so the tar stream never goes out of step.
func copyExactly(w io.Writer, r io.Reader, size int64) error {
	n, err := io.CopyN(w, r, size)
	if err != nil && err != io.EOF {
		return err
	}
	for n < size {
		k := min(size-n, 32<<10)
		if _, err := w.Write(make([]byte, k)); err != nil {
			return err
		}
		n += k
	}
	return nil
}

// manifest adds the synthetic member with the defaults of a fresh
// tarfile.TarInfo: mode 0644, owner 0:0 without names, mtime 0.
func (t *tarball) manifest() error {
	body := manifestJSON(t.name, t.files, t.bytes, t.excludes)
	hdr := &tar.Header{Name: t.name + "/" + manifestName, Mode: 0o644, Size: int64(len(body)),
		Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
	if err := t.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := t.tw.Write(body)
	return err
}

// manifestJSON is json.dumps(manifest, indent=2, sort_keys=True).
func manifestJSON(source string, files int, total int64, excludes []string) []byte {
	var b strings.Builder
	b.WriteString("{\n  \"excludes\": [")
	for i, e := range excludes {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n    " + pyJSONString(e))
	}
	if len(excludes) > 0 {
		b.WriteString("\n  ")
	}
	fmt.Fprintf(&b, "],\n  \"file_count\": %d,\n  \"format\": \"tar.gz\",\n  \"source\": %s,\n  \"total_bytes\": %d\n}",
		files, pyJSONString(source), total)
	return []byte(b.String())
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
