package core

import "context"

// rederiveChunk is how many workspaces rederive saves per hold of the
// feed's lock, so other saves wait for a chunk, never for a whole account.
const rederiveChunk = 256

// rederive saves again every live workspace of account whose derived
// fields (delete_after) would change, as one atomic read-derive-save per
// workspace: a concurrent save can never be overwritten by a stale copy.
// Every account's, when accountID is "".
func (f *Feed) rederive(ctx context.Context, accountID string) error {
	if err := f.waitLoaded(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	var ids []string
	if accountID == "" {
		for id := range f.live {
			ids = append(ids, id)
		}
	} else {
		for id := range f.byAccount[accountID] {
			ids = append(ids, id)
		}
	}
	f.mu.Unlock()
	for len(ids) > 0 {
		n := min(len(ids), rederiveChunk)
		if err := f.rederiveSome(ctx, ids[:n]); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

func (f *Feed) rederiveSome(ctx context.Context, ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Another replica may have changed some of them a moment ago: save
	// on top of its changes, not of copies from before them.
	if err := f.catchUpLocked(ctx, 1<<62); err != nil {
		return err
	}
	for _, id := range ids {
		ws, ok := f.live[id]
		if !ok || f.derive == nil {
			continue
		}
		if d := f.derive(ws); !derivedChanged(d, ws) {
			continue
		}
		if _, err := f.saveLocked(ctx, ws); err != nil {
			return err
		}
	}
	return ctx.Err()
}
