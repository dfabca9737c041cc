package exportstore

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// listPage is how many keys one list call asks for.
const listPage = 1000

// exportDir is what a listing found of one export's directory.
type exportDir struct {
	ref       Ref
	committed bool
	keys      []string
	bytes     int64
	// uploads are S3 multipart uploads begun and never finished.
	uploads []openMultipart
}

// scan lists every key under rel (relative to the prefix) and groups the
// ones in the layout by export directory, in key order. Keys outside the
// layout are ignored.
func (s *Store) scan(ctx context.Context, rel string) ([]*exportDir, error) {
	byDir := map[string]*exportDir{}
	var order []string
	entry := func(ref Ref) *exportDir {
		d := ref.Dir()
		e := byDir[d]
		if e == nil {
			e = &exportDir{ref: ref}
			byDir[d] = e
			order = append(order, d)
		}
		return e
	}
	token := blob.FirstPageToken
	for {
		pctx, cancel := s.opCtx(ctx)
		objs, next, err := s.bucket.ListPage(pctx, token, listPage, &blob.ListOptions{Prefix: s.prefix + rel})
		if err != nil {
			err = s.fail(pctx, err, "list %s%s", s.prefix, rel)
			cancel()
			return nil, err
		}
		cancel()
		for _, o := range objs {
			if o.IsDir {
				continue
			}
			ref, file, ok := parseKey(strings.TrimPrefix(o.Key, s.prefix))
			if !ok {
				continue
			}
			e := entry(ref)
			e.keys = append(e.keys, o.Key)
			e.bytes += o.Size
			if file == ManifestName {
				e.committed = true
			}
		}
		if len(next) == 0 {
			break
		}
		token = next
	}
	mps, err := s.multipartUploads(ctx, rel)
	if err != nil {
		return nil, err
	}
	for _, m := range mps {
		ref, _, ok := parseKey(strings.TrimPrefix(m.key, s.prefix))
		if !ok {
			continue
		}
		e := entry(ref)
		e.uploads = append(e.uploads, m)
	}
	slices.Sort(order)
	out := make([]*exportDir, len(order))
	for i, d := range order {
		out[i] = byDir[d]
	}
	return out, nil
}

// scopeRel is the listing prefix for one owner's workspace (workspace ""
// for all of the owner's).
func scopeRel(owner, workspace string) (string, error) {
	if owner != "" {
		if err := checkSegment("owner", owner); err != nil {
			return "", err
		}
	}
	rel := ownerSegment(owner) + "/"
	if workspace != "" {
		if err := checkSegment("workspace", workspace); err != nil {
			return "", err
		}
		rel += workspace + "/"
	}
	return rel, nil
}

// removeExport deletes an export's objects: manifest.json first, then the
// keys in known and every key its directory lists, then aborts its
// unfinished S3 multipart uploads. It returns what it deleted (bytes as
// listed). An object already gone is no error.
func (s *Store) removeExport(ctx context.Context, ref Ref, known []string) (removed, error) {
	dirs, err := s.scan(ctx, ref.Dir())
	var keys []string
	var bytes int64
	var uploads []openMultipart
	for _, d := range dirs {
		if d.ref == ref {
			keys, bytes, uploads = d.keys, d.bytes, d.uploads
		}
	}
	for _, k := range known {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	manifest := s.key(ref, ManifestName)
	slices.SortStableFunc(keys, func(a, b string) int {
		switch {
		case a == manifest && b != manifest:
			return -1
		case b == manifest && a != manifest:
			return 1
		}
		return 0
	})
	n := 0
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, k := range keys {
		dctx, cancel := s.opCtx(ctx)
		derr := s.bucket.Delete(dctx, k)
		switch {
		case derr == nil:
			n++
		case gcerrors.Code(derr) == gcerrors.NotFound:
		case k == manifest:
			// Never leave objects behind a manifest that could not go:
			// they would read as committed.
			cancel()
			return removed{n, bytes, 0}, s.fail(dctx, derr, "delete %s (nothing else deleted)", k)
		default:
			errs = append(errs, s.fail(dctx, derr, "delete %s", k))
		}
		cancel()
	}
	aborted := 0
	for _, m := range uploads {
		if err := s.abortMultipart(ctx, m); err != nil {
			errs = append(errs, err)
		} else {
			aborted++
		}
	}
	r := removed{n, bytes, aborted}
	if len(errs) > 0 {
		return r, errors.Join(append(errs, errors.New("exportstore: what was left is removed by a later Sweep"))...)
	}
	return r, nil
}

// removed counts what removeExport deleted.
type removed struct {
	objects int
	bytes   int64
	uploads int
}

// readAll reads at most limit bytes of r.
func readAll(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(b)) > limit {
		return nil, errors.New("larger than the limit")
	}
	return b, err
}
