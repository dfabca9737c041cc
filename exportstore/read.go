package exportstore

import (
	"context"
	"fmt"
	"io"
	"time"

	"gocloud.dev/blob"
)

// maxManifest bounds the manifest Manifest reads into memory.
const maxManifest = 64 << 20

// List returns the committed exports of owner's workspace, oldest first
// (workspace "" lists all of owner's). Staging exports are not listed.
func (s *Store) List(ctx context.Context, owner, workspace string) ([]Ref, error) {
	rel, err := scopeRel(owner, workspace)
	if err != nil {
		return nil, err
	}
	dirs, err := s.scan(ctx, rel)
	if err != nil {
		return nil, err
	}
	var out []Ref
	for _, d := range dirs {
		if d.committed {
			out = append(out, d.ref)
		}
	}
	return out, nil
}

// committed returns ErrNotFound unless ref's manifest exists.
func (s *Store) committed(ctx context.Context, ref Ref) error {
	if err := ref.check(); err != nil {
		return err
	}
	ok, err := s.exists(ctx, s.key(ref, ManifestName))
	if err != nil {
		return err
	}
	if !ok {
		return withKind(fmt.Errorf("exportstore: export %s is not committed", s.prefix+ref.Dir()), ErrNotFound)
	}
	return nil
}

// fileKey checks that ref is committed and name is a safe name, and
// returns its key.
func (s *Store) fileKey(ctx context.Context, ref Ref, name string) (string, error) {
	if err := checkSegment("file name", name); err != nil {
		return "", err
	}
	if err := s.committed(ctx, ref); err != nil {
		return "", err
	}
	return s.key(ref, name), nil
}

// Manifest returns a committed export's manifest.json.
func (s *Store) Manifest(ctx context.Context, ref Ref) ([]byte, error) {
	r, err := s.Open(ctx, ref, ManifestName)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := readAll(r, maxManifest)
	if err != nil {
		return nil, fmt.Errorf("exportstore: read %s: %w", r.key, err)
	}
	return b, nil
}

// Info describes a stored file.
type Info struct {
	Size    int64
	ModTime time.Time
}

// Stat returns the size and modification time of a committed export's
// file (for Content-Length and Last-Modified).
func (s *Store) Stat(ctx context.Context, ref Ref, name string) (Info, error) {
	key, err := s.fileKey(ctx, ref, name)
	if err != nil {
		return Info{}, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	a, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return Info{}, s.notFound(ctx, err, "stat %s", key)
	}
	return Info{Size: a.Size, ModTime: a.ModTime}, nil
}

// Verify streams a committed export's file back and compares its size
// and SHA-256 with the manifest's (ErrMismatch when they differ), so any
// replica can re-check an export it did not write.
func (s *Store) Verify(ctx context.Context, ref Ref, name string, size int64, sha256 string) error {
	key, err := s.fileKey(ctx, ref, name)
	if err != nil {
		return err
	}
	return s.verifyKey(ctx, key, size, sha256)
}

// Reader reads a committed export's file. It is an io.ReadSeeker (a Seek
// that moves opens a new range read on the next Read), so it can feed
// http.ServeContent; each Read is bounded by the stall timeout.
type Reader struct {
	r    *blob.Reader
	key  string
	wd   *watchdog
	stop func()
	s    *Store
	ctx  context.Context
}

// Open opens a committed export's file for reading from its start.
func (s *Store) Open(ctx context.Context, ref Ref, name string) (*Reader, error) {
	return s.openRange(ctx, ref, name, 0, -1)
}

// ReadRange opens n bytes of a committed export's file from offset off
// (n < 0: to the end), for an HTTP Range request. Reading past the end
// returns what there is.
func (s *Store) ReadRange(ctx context.Context, ref Ref, name string, off, n int64) (*Reader, error) {
	if off < 0 {
		return nil, fmt.Errorf("exportstore: read %s: negative offset %d", name, off)
	}
	return s.openRange(ctx, ref, name, off, n)
}

func (s *Store) openRange(ctx context.Context, ref Ref, name string, off, n int64) (*Reader, error) {
	key, err := s.fileKey(ctx, ref, name)
	if err != nil {
		return nil, err
	}
	rctx, wd, stop := withWatchdog(ctx, s.opts.StallTimeout)
	wd.arm()
	r, err := s.bucket.NewRangeReader(rctx, key, off, n, nil)
	wd.disarm()
	if err != nil {
		err = s.notFound(rctx, err, "read %s", key)
		stop()
		return nil, err
	}
	return &Reader{r: r, key: key, wd: wd, stop: stop, s: s, ctx: rctx}, nil
}

// Size is the whole object's size (not the range's).
func (r *Reader) Size() int64 { return r.r.Size() }

// ModTime is the object's modification time.
func (r *Reader) ModTime() time.Time { return r.r.ModTime() }

// Read reads from the store.
func (r *Reader) Read(p []byte) (int, error) {
	r.wd.arm()
	n, err := r.r.Read(p)
	r.wd.disarm()
	if err != nil && err != io.EOF {
		err = r.s.fail(r.ctx, err, "read %s", r.key)
	}
	return n, err
}

// Seek sets the offset of the next Read (relative to the range).
func (r *Reader) Seek(offset int64, whence int) (int64, error) { return r.r.Seek(offset, whence) }

// Close ends the read.
func (r *Reader) Close() error {
	err := r.r.Close()
	r.stop()
	return err
}

// notFound is fail with a missing object classed ErrNotFound.
func (s *Store) notFound(ctx context.Context, err error, format string, args ...any) error {
	e := s.fail(ctx, err, format, args...)
	if kindOf(e) == nil && isNotFound(err) {
		return withKind(e, ErrNotFound)
	}
	return e
}
