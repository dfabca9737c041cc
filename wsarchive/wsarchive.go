// Package wsarchive is the workspace archive an export holds, and how
// the agent-server's own archives are read.
//
// An archive is a tar.gz with one top directory that stands for the box
// directory it was made of (its name is that directory's base name):
// every other member is below it, directories and regular files only,
// and its last member may be the agent-server's synthetic
// <top>/archive_manifest.json, which is not a file of the workspace. The
// export's archive keeps that shape whether it is the agent-server's
// archive as it came (nothing was left out) or companion's re-pack of
// several of them (the agent-server narrowed the first one to a
// repository: see exportrun), so one reader serves both and any tar
// reads it.
//
// Beside it an export keeps an index (JSON lines, one Entry per
// directory and file, paths relative to the top directory), so that a
// restore can check every file it puts back against the SHA-256 taken
// when the export was made.
//
// Guarantees:
//   - Nothing is held whole in memory: members stream through, hashed on
//     the way.
//   - A member whose name is not a clean path below the top directory,
//     a link, or an archive that ends before its own manifest's counts
//     are reached is an error, never skipped silently: the box that made
//     it is not trusted.
package wsarchive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// ManifestName is the base name of the agent-server's synthetic manifest
// member.
const ManifestName = "archive_manifest.json"

// maxManifest bounds the synthetic manifest's size (its excludes list is
// what grows).
const maxManifest = 1 << 20

// Entry types.
const (
	TypeFile = "file"
	TypeDir  = "dir"
)

// Entry is one line of an archive's index.
type Entry struct {
	// Path is relative to the archive's top directory, slash-separated.
	Path string `json:"path"`
	Type string `json:"type"`
	// Mode holds the permission bits (0o7777).
	Mode   int64  `json:"mode"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// AgentManifest is the agent-server's synthetic archive_manifest.json.
type AgentManifest struct {
	Format     string   `json:"format"`
	Source     string   `json:"source"`
	FileCount  int64    `json:"file_count"`
	TotalBytes int64    `json:"total_bytes"`
	Excludes   []string `json:"excludes"`
}

// Member is one member of an archive as Read hands it out.
type Member struct {
	// Rel is the path below the top directory ("" for the top itself).
	Rel    string
	Header *tar.Header
	// Body reads a regular file's bytes; it is empty for a directory.
	Body io.Reader
}

// Summary is what Read found.
type Summary struct {
	// Top is the name of the top directory.
	Top string
	// Files and Bytes count the regular files (the synthetic manifest
	// not included).
	Files, Bytes int64
	// Manifest is the synthetic manifest, nil when the archive has none
	// (a workspace file held its name, or companion made the archive).
	Manifest *AgentManifest
}

// Read reads a tar.gz archive from r and calls fn for every member but
// the synthetic manifest, in order. fn must consume Body before it
// returns if it wants the bytes. When the archive carries a synthetic
// manifest, its counts must equal what was read.
func Read(r io.Reader, fn func(Member) error) (Summary, error) {
	var sum Summary
	gz, err := gzip.NewReader(r)
	if err != nil {
		return sum, fmt.Errorf("archive: not gzip: %w", err)
	}
	tr := tar.NewReader(gz)
	hdr, err := tr.Next()
	for err == nil {
		var rel string
		rel, err = sum.rel(hdr.Name)
		if err != nil {
			return sum, err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = fn(Member{Rel: rel, Header: hdr, Body: bytes.NewReader(nil)})
			hdr, err = next(tr, err)
			continue
		case tar.TypeReg:
		default:
			return sum, fmt.Errorf("archive: member %q is of type %q: only directories and regular files are expected", hdr.Name, hdr.Typeflag)
		}
		if rel == "" {
			return sum, fmt.Errorf("archive: the top %q is a file, not a directory", hdr.Name)
		}
		if rel == ManifestName && hdr.ModTime.Unix() == 0 && hdr.Size <= maxManifest {
			// Perhaps the synthetic manifest: it is if it is the last
			// member and reads as one.
			b, rerr := io.ReadAll(tr)
			if rerr != nil {
				return sum, fmt.Errorf("archive: %s: %w", hdr.Name, rerr)
			}
			nh, nerr := tr.Next()
			if m, ok := agentManifest(b); ok && errors.Is(nerr, io.EOF) {
				sum.Manifest = m
				return sum, sum.check()
			}
			if err = sum.file(fn, rel, hdr, bytes.NewReader(b)); err != nil {
				return sum, err
			}
			hdr, err = nh, nerr
			continue
		}
		err = sum.file(fn, rel, hdr, tr)
		hdr, err = next(tr, err)
	}
	if !errors.Is(err, io.EOF) {
		return sum, err
	}
	if sum.Top == "" {
		return sum, errors.New("archive: empty, not even its top directory")
	}
	return sum, sum.check()
}

func next(tr *tar.Reader, err error) (*tar.Header, error) {
	if err != nil {
		return nil, err
	}
	h, err := tr.Next()
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("archive: %w", err)
	}
	return h, err
}

// file hands a regular file to fn and counts it; a body fn left unread
// is read here, so the counts hold.
func (sum *Summary) file(fn func(Member) error, rel string, hdr *tar.Header, body io.Reader) error {
	cr := &countReader{r: body}
	if err := fn(Member{Rel: rel, Header: hdr, Body: cr}); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return fmt.Errorf("archive: %s: %w", hdr.Name, err)
	}
	if cr.n != hdr.Size {
		return fmt.Errorf("archive: %s: %d bytes read, its header says %d", hdr.Name, cr.n, hdr.Size)
	}
	sum.Files++
	sum.Bytes += hdr.Size
	return nil
}

// check compares the synthetic manifest's counts with what was read.
func (sum *Summary) check() error {
	m := sum.Manifest
	if m != nil && (m.FileCount != sum.Files || m.TotalBytes != sum.Bytes) {
		return fmt.Errorf("archive: its manifest counts %d files and %d bytes, the archive holds %d files and %d bytes: it is incomplete",
			m.FileCount, m.TotalBytes, sum.Files, sum.Bytes)
	}
	return nil
}

// rel checks a member's name and returns it relative to the top
// directory, which the first member names.
func (sum *Summary) rel(name string) (string, error) {
	name = strings.TrimSuffix(name, "/")
	clean := path.Clean(name)
	if name == "" || clean != name || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
		return "", fmt.Errorf("archive: member %q is not a clean relative path", name)
	}
	top, rest, _ := strings.Cut(name, "/")
	if sum.Top == "" {
		sum.Top = top
	}
	if top != sum.Top {
		return "", fmt.Errorf("archive: member %q is outside its top directory %q", name, sum.Top)
	}
	return rest, nil
}

// agentManifest parses b as the agent-server's synthetic manifest.
func agentManifest(b []byte) (*AgentManifest, bool) {
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return nil, false
	}
	for _, k := range []string{"format", "source", "file_count", "total_bytes", "excludes"} {
		if _, ok := raw[k]; !ok {
			return nil, false
		}
	}
	var m AgentManifest
	if json.Unmarshal(b, &m) != nil || m.Format != "tar.gz" {
		return nil, false
	}
	return &m, true
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// IndexEntry is the index line of a member, hashing a file's body as it
// is read through the returned reader; the entry's SHA256 is set once
// the reader hit EOF (done reports it).
func IndexEntry(m Member) (e *Entry, body io.Reader) {
	e = &Entry{Path: m.Rel, Mode: m.Header.Mode & 0o7777}
	if m.Header.Typeflag == tar.TypeDir {
		e.Type = TypeDir
		return e, m.Body
	}
	e.Type, e.Size = TypeFile, m.Header.Size
	h := sha256.New()
	return e, &hashReader{r: m.Body, h: h, done: func() { e.SHA256 = hex.EncodeToString(h.Sum(nil)) }}
}

type hashReader struct {
	r    io.Reader
	h    interface{ Write([]byte) (int, error) }
	done func()
}

func (r *hashReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.h.Write(p[:n])
	if errors.Is(err, io.EOF) && r.done != nil {
		r.done()
		r.done = nil
	}
	return n, err
}

// epoch is the time of the members companion writes without one.
var epoch = time.Unix(0, 0).UTC()
