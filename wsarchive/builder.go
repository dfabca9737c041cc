package wsarchive

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// Builder writes an archive of the shape Read reads, member by member,
// and the index of what it wrote. Its members are added in any order
// the caller likes, each path once; a file's parents need not have been
// added (the archive holds the directories the caller adds). After an
// error the archive is spoilt: abandon it.
type Builder struct {
	gz    *gzip.Writer
	tw    *tar.Writer
	index *json.Encoder
	top   string
	seen  map[string]bool
	// Files and Bytes count the regular files written.
	Files, Bytes int64
}

// NewBuilder starts an archive on w whose top directory is named top
// (with mode 0o755), writing index lines to index.
func NewBuilder(w io.Writer, top string, index io.Writer) (*Builder, error) {
	if top == "" || strings.Contains(top, "/") || top == "." || top == ".." {
		return nil, fmt.Errorf("archive: top directory name %q is not one path element", top)
	}
	gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	enc := json.NewEncoder(index)
	enc.SetEscapeHTML(false)
	b := &Builder{gz: gz, tw: tar.NewWriter(gz), index: enc, top: top, seen: map[string]bool{}}
	return b, b.Dir("", 0o755, time.Time{})
}

// name checks rel and returns its member name.
func (b *Builder) name(rel string) (string, error) {
	if rel != "" && (path.Clean(rel) != rel || path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../")) {
		return "", fmt.Errorf("archive: %q is not a clean relative path", rel)
	}
	if b.seen[rel] {
		return "", fmt.Errorf("archive: %q is added twice", rel)
	}
	b.seen[rel] = true
	if rel == "" {
		return b.top, nil
	}
	return b.top + "/" + rel, nil
}

// Dir adds a directory (rel "" is the top directory, which NewBuilder
// adds).
func (b *Builder) Dir(rel string, mode int64, mtime time.Time) error {
	name, err := b.name(rel)
	if err != nil {
		return err
	}
	if err := b.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode & 0o7777, ModTime: orEpoch(mtime),
		Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("archive: %s: %w", name, err)
	}
	if rel == "" {
		return nil
	}
	return b.index.Encode(Entry{Path: rel, Type: TypeDir, Mode: mode & 0o7777})
}

// File adds a regular file of size bytes read from r, hashing it on the
// way; r giving more or fewer bytes is an error.
func (b *Builder) File(rel string, mode, size int64, mtime time.Time, r io.Reader) error {
	if rel == "" {
		return fmt.Errorf("archive: a file cannot be the top directory")
	}
	name, err := b.name(rel)
	if err != nil {
		return err
	}
	if err := b.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: mode & 0o7777,
		ModTime: orEpoch(mtime), Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("archive: %s: %w", name, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(b.tw, h), io.LimitReader(r, size))
	if err != nil {
		return fmt.Errorf("archive: %s: after %d bytes: %w", name, n, err)
	}
	if n != size {
		return fmt.Errorf("archive: %s: %d bytes, want %d", name, n, size)
	}
	b.Files++
	b.Bytes += size
	return b.index.Encode(Entry{Path: rel, Type: TypeFile, Mode: mode & 0o7777, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))})
}

// Copy adds a member Read handed out, under the directory at (a path
// relative to this archive's top, "" for the top itself).
func (b *Builder) Copy(at string, m Member) error {
	rel := path.Join(at, m.Rel)
	if m.Header.Typeflag == tar.TypeDir {
		if rel == "" {
			return nil // the top, added by NewBuilder
		}
		return b.Dir(rel, m.Header.Mode, m.Header.ModTime)
	}
	return b.File(rel, m.Header.Mode, m.Header.Size, m.Header.ModTime, m.Body)
}

// Has reports whether rel was added.
func (b *Builder) Has(rel string) bool { return b.seen[rel] }

// Close writes the synthetic manifest the agent-server would (unless a
// workspace file took its name), then ends the tar and gzip streams.
// excludes are the patterns the archive was made with.
func (b *Builder) Close(excludes []string) error {
	if !b.seen[ManifestName] {
		if excludes == nil {
			excludes = []string{}
		}
		m := AgentManifest{Format: "tar.gz", Source: b.top, FileCount: b.Files, TotalBytes: b.Bytes, Excludes: excludes}
		data, err := manifestJSON(m)
		if err != nil {
			return err
		}
		if err := b.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: b.top + "/" + ManifestName, Size: int64(len(data)),
			Mode: 0o644, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("archive: manifest: %w", err)
		}
		if _, err := b.tw.Write(data); err != nil {
			return fmt.Errorf("archive: manifest: %w", err)
		}
	}
	if err := b.tw.Close(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return b.gz.Close()
}

// manifestJSON writes m with sorted keys and a two-space indent, as the
// agent-server writes its own.
func manifestJSON(m AgentManifest) ([]byte, error) {
	// encoding/json writes a map's keys sorted.
	obj := map[string]any{"format": m.Format, "source": m.Source, "file_count": m.FileCount,
		"total_bytes": m.TotalBytes, "excludes": m.Excludes}
	return json.MarshalIndent(obj, "", "  ")
}

func orEpoch(t time.Time) time.Time {
	if t.IsZero() {
		return epoch
	}
	return t
}
