package exportstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gocloud.dev/blob"
)

// copyBuf is the buffer each copy uses.
const copyBuf = 1 << 20

// Object is one file uploaded and read back equal.
type Object struct {
	Name   string
	Bytes  int64
	SHA256 string
}

// Upload is one export being written; finish it with Commit or Abort.
// It is not safe for concurrent use.
type Upload struct {
	s       *Store
	ref     Ref
	objects []Object
	names   map[string]bool
	// written are the keys that may exist in the store (uploads begun),
	// manifest last.
	written []string
	done    bool
}

// Begin starts an export of workspace (owned by owner, "" for none) under
// the caller's export id (its record, which must say the export is
// running before Begin is called, so a Sweep's alive callback sees it).
// Nothing is written yet.
func (s *Store) Begin(owner, workspace, exportID string) (*Upload, error) {
	ref := Ref{Owner: owner, Workspace: workspace, ID: exportID, Stamp: s.opts.Now().UTC().Truncate(1e9)}
	if err := ref.check(); err != nil {
		return nil, err
	}
	return &Upload{s: s, ref: ref, names: map[string]bool{}}, nil
}

// Ref is the export being written.
func (u *Upload) Ref() Ref { return u.ref }

// Objects are the files uploaded so far, each read back equal.
func (u *Upload) Objects() []Object { return append([]Object(nil), u.objects...) }

// Add streams r into the export as name, hashing it while it uploads,
// then reads the object back from the store and hashes it again. It
// returns the object's size and SHA-256 once both agree. A source with a
// Stat method (an *os.File) gets parts large enough for its size. On any error
// (the source's too) the upload is aborted: what was written is deleted.
func (u *Upload) Add(ctx context.Context, name string, r io.Reader) (Object, error) {
	if u.done {
		return Object{}, errors.New("exportstore: upload already finished")
	}
	if err := checkSegment("file name", name); err != nil || name == ManifestName || u.names[name] {
		u.Abort(ctx)
		if err == nil {
			err = fmt.Errorf("exportstore: file name %q is reserved or used twice", name)
		}
		return Object{}, err
	}
	u.names[name] = true
	o, err := u.put(ctx, name, r)
	if err != nil {
		u.Abort(ctx)
		return Object{}, err
	}
	u.objects = append(u.objects, o)
	return o, nil
}

// Commit writes manifest as manifest.json, last, and reads it back: from
// then on the export is committed and readers see it. The caller builds
// the manifest from Objects. On error the upload is aborted.
func (u *Upload) Commit(ctx context.Context, manifest []byte) (Ref, error) {
	if u.done {
		return Ref{}, errors.New("exportstore: upload already finished")
	}
	if _, err := u.put(ctx, ManifestName, strings.NewReader(string(manifest))); err != nil {
		u.Abort(ctx)
		return Ref{}, err
	}
	u.done = true
	return u.ref, nil
}

// Abort deletes what the upload wrote, manifest first (so nothing reads
// as committed while the rest goes), then every object under the
// export's directory. It is a no-op after Commit. Deleting uses its own
// time limit even when ctx is already done; what it cannot delete is left
// for Sweep, and the error says so.
func (u *Upload) Abort(ctx context.Context) error {
	if u.done {
		return nil
	}
	u.done = true
	ctx = context.WithoutCancel(ctx)
	_, err := u.s.removeExport(ctx, u.ref, u.written)
	return err
}

// maxParts is how many parts an upload may take: S3 allows 10,000; the
// margin covers a file that grows while it is read.
const maxParts = 9000

// partSize is the part size for r: base, or more for a file too large to
// fit in maxParts of it (rounded up to MiB; GCS wants 256 KiB multiples).
// A source of unknown size gets base: at 5 MiB, objects up to 43 GiB.
func partSize(base int, r io.Reader) int {
	f, ok := r.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return base
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() <= int64(base)*maxParts {
		return base
	}
	need := (fi.Size() + maxParts - 1) / maxParts
	return int((need + 1<<20 - 1) &^ (1<<20 - 1))
}

// put uploads one object and verifies it.
func (u *Upload) put(ctx context.Context, name string, r io.Reader) (Object, error) {
	s := u.s
	key := s.key(u.ref, name)
	u.written = append(u.written, key)
	wctx, wd, stop := withWatchdog(ctx, s.opts.StallTimeout)
	defer stop()
	w, err := s.bucket.NewWriter(wctx, key, &blob.WriterOptions{
		BufferSize:                  partSize(s.opts.PartSize, r),
		MaxConcurrency:              s.opts.Concurrency,
		ContentType:                 "application/octet-stream",
		DisableContentTypeDetection: true,
	})
	if err != nil {
		return Object{}, s.fail(wctx, err, "upload %s", key)
	}
	h := sha256.New()
	src := &sourceReader{r: r}
	n, err := io.CopyBuffer(io.MultiWriter(h, guardedWriter{w, wd}), src, make([]byte, copyBuf))
	if err != nil {
		// Not the store's fault when the source failed: such an error is
		// not classified as a store error.
		if src.err != nil && errors.Is(err, src.err) {
			err = fmt.Errorf("exportstore: upload %s: reading the source after %d bytes: %w", key, n, err)
		} else {
			err = s.fail(wctx, err, "upload %s after %d bytes", key, n)
		}
		// Cancelling the write's context before Close aborts the
		// upload, so a partial object is never completed.
		stop()
		w.Close()
		return Object{}, err
	}
	// Close sends the last part and completes the upload: one part's
	// worth of waiting.
	wd.arm()
	err = w.Close()
	wd.disarm()
	if err != nil {
		return Object{}, s.fail(wctx, err, "upload %s: finish", key)
	}
	if err := s.durable(key); err != nil {
		return Object{}, s.fail(wctx, err, "upload %s: sync", key)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if s.beforeVerify != nil {
		s.beforeVerify(key)
	}
	if err := s.verifyKey(ctx, key, n, sum); err != nil {
		return Object{}, err
	}
	return Object{Name: name, Bytes: n, SHA256: sum}, nil
}

// verifyKey streams key back from the store and compares its size and
// SHA-256 with size and sum.
func (s *Store) verifyKey(ctx context.Context, key string, size int64, sum string) error {
	rctx, wd, stop := withWatchdog(ctx, s.opts.StallTimeout)
	defer stop()
	wd.arm()
	r, err := s.bucket.NewReader(rctx, key, nil)
	wd.disarm()
	if err != nil {
		return s.fail(rctx, err, "read back %s", key)
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, guardedReader{r, wd}, make([]byte, copyBuf))
	if err != nil {
		return s.fail(rctx, err, "read back %s after %d bytes", key, n)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if n != size || got != sum {
		return withKind(fmt.Errorf("exportstore: read back %s: uploaded %d bytes sha256 %s, read back %d bytes sha256 %s",
			key, size, sum, n, got), ErrMismatch)
	}
	return nil
}

// sourceReader remembers the error of the caller's source, so a failure
// there is told apart from the store's.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}
