package core

import (
	"context"
)

// Pages of GoneExports.
const (
	// DefaultGonePage is how many exports GoneExports returns when no
	// limit is asked for.
	DefaultGonePage = 100
	// MaxGonePage is the most one call returns.
	MaxGonePage = 500
	// goneScanRows bounds the export records one call reads from the
	// store, whatever the table holds: an owner with thousands of exports
	// of live workspaces and few deleted ones gets a short (even empty)
	// page with a next cursor rather than a scan of everything.
	goneScanRows = 5000
)

// GoneExports returns owner's exports whose workspace no longer exists
// (no live workspace with that id is owner's: deleted, its tombstone
// maybe pruned, or handed to someone else; or its box vanished outside
// companion, state deleted), newest first, at most limit
// (0: DefaultGonePage). next is the before of the next page, "" when
// there is none.
//
// It reads owner's records page by page from the store (newest first on
// the owner index) and keeps those whose workspace the feed, which holds
// every live workspace in memory, does not have for owner. What one call
// costs: at most goneScanRows records read, in ceil(goneScanRows/batch)
// index range reads of at most batch rows each (batch is 2×limit, 64 to
// MaxGonePage), and one map lookup per record under one feed lock per
// batch; no query per record. A page may therefore hold fewer than limit
// exports, or none, while next is not "": the caller asks again from
// next. Walking every page reads each record once.
func (s *Service) GoneExports(ctx context.Context, owner, before string, limit int) (list []ExportRecord, next string, err error) {
	if limit == 0 {
		limit = DefaultGonePage
	}
	if limit < 0 || limit > MaxGonePage {
		return nil, "", Errorf(KindInvalid, "limit must be between 1 and %d, not %d", MaxGonePage, limit)
	}
	store := s.exportStore()
	if store == nil {
		return []ExportRecord{}, "", nil
	}
	batch := min(max(2*limit, 64), MaxGonePage)
	list = make([]ExportRecord, 0, limit)
	cursor := before
	for scanned := 0; scanned < goneScanRows; {
		n := min(batch, goneScanRows-scanned)
		page, err := store.ListOwnerExports(ctx, owner, cursor, n)
		if err != nil {
			return nil, "", err
		}
		live, err := s.feed.ownedLive(ctx, owner, page)
		if err != nil {
			return nil, "", err
		}
		last := len(page) < n // the store has nothing older
		for i, e := range page {
			cursor = e.ID
			if live[e.WorkspaceID] {
				continue
			}
			list = append(list, e)
			if len(list) == limit {
				if last && !anyGone(page[i+1:], live) {
					return list, "", nil // nothing left to find: no empty last page
				}
				return list, e.ID, nil
			}
		}
		if last {
			return list, "", nil
		}
		scanned += len(page)
	}
	return list, cursor, nil
}

// anyGone reports whether any of exports is of a workspace not in live.
func anyGone(exports []ExportRecord, live map[string]bool) bool {
	for _, e := range exports {
		if !live[e.WorkspaceID] {
			return true
		}
	}
	return false
}

// ownedLive says which of the exports' workspaces are live (their box
// not gone) and owner's,
// under one lock. It waits for the feed's load, and fails with it: before
// the workspaces are loaded every one would look gone.
func (f *Feed) ownedLive(ctx context.Context, owner string, exports []ExportRecord) (map[string]bool, error) {
	if err := f.waitLoaded(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]bool, len(exports))
	for _, e := range exports {
		// A workspace whose box vanished outside companion is listed as
		// deleted; its exports are what is left of it.
		if ws, ok := f.live[e.WorkspaceID]; ok && ws.Owner == owner && ws.State != StateDeleted {
			out[e.WorkspaceID] = true
		}
	}
	return out, nil
}
