package exportstore

import (
	"context"
	"errors"
	"fmt"
)

// Swept is an uncommitted export Sweep deleted.
type Swept struct {
	Ref Ref
	// Objects and Bytes are what was deleted (Bytes as listed).
	Objects int
	Bytes   int64
	// Uploads counts unfinished S3 multipart uploads aborted (a writer
	// killed in the middle of a file leaves one; its parts are not
	// objects).
	Uploads int
}

// Sweep deletes the objects of uncommitted exports (no manifest.json)
// under the whole prefix for which alive returns false, and returns them
// so the caller can log what was removed. alive gets each staging
// export's Ref and must return true for any export that may still be
// written (its record says running): the caller owns the export records,
// so it decides. An export that commits while the sweep runs is left
// alone: its manifest is checked again just before deleting.
func (s *Store) Sweep(ctx context.Context, alive func(Ref) bool) ([]Swept, error) {
	return s.sweep(ctx, "", alive)
}

// SweepWorkspace is Sweep for one owner's workspace ("" owner: none).
func (s *Store) SweepWorkspace(ctx context.Context, owner, workspace string, alive func(Ref) bool) ([]Swept, error) {
	if workspace == "" {
		return nil, errors.New("exportstore: sweep: no workspace")
	}
	rel, err := scopeRel(owner, workspace)
	if err != nil {
		return nil, err
	}
	return s.sweep(ctx, rel, alive)
}

func (s *Store) sweep(ctx context.Context, rel string, alive func(Ref) bool) ([]Swept, error) {
	if alive == nil {
		return nil, errors.New("exportstore: sweep needs an alive callback")
	}
	dirs, err := s.scan(ctx, rel)
	if err != nil {
		return nil, err
	}
	var out []Swept
	var errs []error
	for _, d := range dirs {
		if d.committed || alive(d.ref) {
			continue
		}
		ok, err := s.exists(ctx, s.key(d.ref, ManifestName))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			continue
		}
		r, err := s.removeExport(ctx, d.ref, d.keys)
		if r.objects > 0 || r.uploads > 0 {
			out = append(out, Swept{Ref: d.ref, Objects: r.objects, Bytes: r.bytes, Uploads: r.uploads})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", d.ref.Dir(), err))
		}
	}
	return out, errors.Join(errs...)
}

// exists reports whether key exists.
func (s *Store) exists(ctx context.Context, key string) (bool, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	ok, err := s.bucket.Exists(ctx, key)
	if err != nil {
		return false, s.fail(ctx, err, "look up %s", key)
	}
	return ok, nil
}

// Remove deletes a committed export: its manifest first, so that what a
// failure leaves no longer reads as committed (a later Sweep removes the
// rest), then its other objects and unfinished uploads. It returns the
// bytes it listed. An export already gone is no error.
func (s *Store) Remove(ctx context.Context, ref Ref) (int64, error) {
	if err := ref.check(); err != nil {
		return 0, err
	}
	r, err := s.removeExport(ctx, ref, nil)
	return r.bytes, err
}
