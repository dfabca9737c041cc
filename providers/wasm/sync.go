package wasm

import (
	"context"
	"errors"
	"os"

	"github.com/canvasapp/companion/core"
)

// Shared reports whether installed modules live in a shared store (Pins
// is a ModuleStore), where Sync follows other hosts' installs and
// removals.
func (h *Host) Shared() bool { return h.shared != nil }

// Sync follows the installs and removals that other hosts on the same
// shared store (Pins is a ModuleStore) made: a module pinned there that
// this host has not loaded, or loaded with other bytes, is loaded (compiled at its
// first use, as at start); a loaded module that is no longer pinned is
// unloaded (calls in flight finish first) and its file, if any, deleted.
// It returns the adapters it loaded and the names it unloaded, for the
// caller's registry. A module that cannot be loaded is reported once per
// pinned hash (in the returned error and the log), not at every Sync.
// Without a shared store Sync does nothing.
func (h *Host) Sync(ctx context.Context) (loaded []*Adapter, removed []string, err error) {
	if h.shared == nil {
		return nil, nil, nil
	}
	h.installMu.Lock()
	defer h.installMu.Unlock()
	pins, err := h.shared.ModuleHashes(ctx)
	if err != nil {
		return nil, nil, err
	}
	var stale []*Adapter
	have := map[string]string{}
	h.mu.Lock()
	for name, a := range h.adapters {
		if a.builtin {
			continue
		}
		if _, ok := pins[name]; !ok {
			stale = append(stale, a)
			continue
		}
		have[name] = a.sha256()
	}
	skip := map[string]bool{}
	for name := range h.embedded {
		skip[name] = true
	}
	h.mu.Unlock()
	var errs []error
	for _, a := range stale {
		if err := a.close(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(h.modulePath(a.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			h.log.Warn("provider module file not deleted", "module", a.name, "path", h.modulePath(a.name), "err", err)
		}
		h.log.Info("provider module unloaded: it was removed elsewhere", "module", a.name)
		removed = append(removed, a.name)
	}
	for name := range h.syncFailed {
		if _, ok := pins[name]; !ok {
			delete(h.syncFailed, name)
		}
	}
	for name, sum := range pins {
		if skip[name] || have[name] == sum {
			continue
		}
		failed, known := h.syncFailed[name]
		if known && failed.sum == sum && !failed.retry {
			continue // the same bytes fail the same way
		}
		a, err := h.Load(ctx, name)
		if err != nil {
			if known && failed.sum == sum {
				continue // reported already; retried quietly
			}
			// Unavailable: no bytes in the store yet (a pin from before,
			// whose file another host has and will copy in) or a read
			// that failed; worth another look at the next Sync.
			h.syncFailed[name] = syncFailure{sum: sum, retry: core.IsKind(err, core.KindUnavailable)}
			h.log.Error("provider module not loaded", "module", name, "err", err)
			errs = append(errs, err)
			continue
		}
		delete(h.syncFailed, name)
		h.log.Info("provider module loaded: it was installed elsewhere", "module", name, "sha256", a.sha256())
		loaded = append(loaded, a)
	}
	return loaded, removed, errors.Join(errs...)
}

// syncFailure is a pinned hash whose load failed at a Sync; retry is set
// when the failure may pass without the hash changing.
type syncFailure struct {
	sum   string
	retry bool
}
