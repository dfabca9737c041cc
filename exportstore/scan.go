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
}

// scan lists every key under rel (relative to the prefix) and groups the
// ones in the layout by export directory, in key order. Keys outside the
// layout are ignored.
func (s *Store) scan(ctx context.Context, rel string) ([]*exportDir, error) {
	byDir := map[string]*exportDir{}
	var order []string
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
			d := ref.Dir()
			e := byDir[d]
			if e == nil {
				e = &exportDir{ref: ref}
				byDir[d] = e
				order = append(order, d)
			}
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
// keys in known and every key its directory lists. It returns how many
// objects it deleted and their bytes (as listed). An object already gone
// is no error.
func (s *Store) removeExport(ctx context.Context, ref Ref, known []string) (int, int64, error) {
	dirs, err := s.scan(ctx, ref.Dir())
	var keys []string
	var bytes int64
	for _, d := range dirs {
		if d.ref == ref {
			keys, bytes = d.keys, d.bytes
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
			return n, bytes, s.fail(dctx, derr, "delete %s (nothing else deleted)", k)
		default:
			errs = append(errs, s.fail(dctx, derr, "delete %s", k))
		}
		cancel()
	}
	if len(errs) > 0 {
		return n, bytes, errors.Join(append(errs, errors.New("exportstore: what was left is removed by a later Sweep"))...)
	}
	return n, bytes, nil
}

// readAll reads at most limit bytes of r.
func readAll(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(b)) > limit {
		return nil, errors.New("larger than the limit")
	}
	return b, err
}
