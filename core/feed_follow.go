package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ChangeNotifier is a store that several processes share (PostgreSQL):
// it tells each of them when any of them committed a revision, so every
// process's feed can follow writes it did not make. SQLite has one process
// per data dir and does not implement it.
type ChangeNotifier interface {
	// WatchChanges calls notify with every revision committed by any
	// process sharing the store, and with 0 after each (re)connection,
	// when notifications may have been missed; broken, when it lost (or
	// cannot make) its connection. It returns when ctx ends. Neither
	// callback may block.
	WatchChanges(ctx context.Context, notify func(rev int64), broken func(err error))
}

// ErrFeedReset is why a Subscription ends when the feed lost track of the
// store's history (tombstones were pruned past its revision while it was
// cut off, or the database was replaced) and reloaded its live set: the
// subscriber must start again from a snapshot.
var ErrFeedReset = errors.New("the change feed reloaded its workspaces; start from a snapshot")

// FollowEvery is how often a following feed reads the store's head even
// without a notification, in case one was lost.
const FollowEvery = 5 * time.Second

// Follow makes f apply the changes other processes write to its store, as
// n announces them, until ctx ends. A notification of a revision above
// f's, a resync (0) or a tick of clock every `every` runs a catch-up; each
// change is applied and published like a local save. log may be nil.
func (f *Feed) Follow(ctx context.Context, n ChangeNotifier, clock Clock, every time.Duration, log *slog.Logger) {
	if clock == nil {
		clock = RealClock{}
	}
	if every <= 0 {
		every = FollowEvery
	}
	if log == nil {
		log = slog.Default()
	}
	var (
		want   atomic.Int64 // highest revision announced
		resync atomic.Bool
		wake   = make(chan struct{}, 1)
		wg     sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer wg.Wait() // the listener is gone when Follow returns
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		lost := false
		n.WatchChanges(ctx, func(rev int64) {
			if rev <= 0 {
				resync.Store(true)
				if lost {
					log.Info("change feed listens to other replicas' changes again")
				}
				lost = false
			}
			for {
				cur := want.Load()
				if rev <= cur || want.CompareAndSwap(cur, rev) {
					break
				}
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}, func(err error) {
			lost = true
			log.Warn("change feed stopped hearing of other replicas' changes; reconnecting", "err", err)
		})
	}()
	if err := f.waitLoaded(ctx); err != nil {
		return
	}
	failing := false
	for {
		tick := clock.NewTimer(every)
		var ticked bool
		select {
		case <-ctx.Done():
			tick.Stop()
			return
		case <-wake:
			tick.Stop()
		case <-tick.C():
			ticked = true
		}
		full := ticked || resync.Swap(false)
		upTo := want.Load()
		if !full && upTo <= f.Rev() {
			continue // our own save, already applied
		}
		if full {
			upTo = 0 // everything the store holds
		}
		if err := f.syncUpTo(ctx, upTo); err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				log.Warn("change feed could not read other replicas' changes; retrying", "err", err)
			}
			failing = true
			continue
		}
		if failing {
			log.Info("change feed caught up with the store again", "rev", f.Rev())
		}
		failing = false
	}
}

// Sync applies and publishes every change the store holds beyond the
// feed's revision: those another process sharing the store wrote.
func (f *Feed) Sync(ctx context.Context) error { return f.SyncTo(ctx, 0) }

// SyncTo is Sync unless the feed already holds revision rev (rev 0
// means unknown: it syncs).
func (f *Feed) SyncTo(ctx context.Context, rev int64) error {
	if err := f.waitLoaded(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rev > 0 && rev <= f.rev {
		return nil
	}
	return f.catchUpLocked(ctx, 1<<62)
}

// syncUpTo applies the store's changes up to revision upTo (0: all of
// them). A notification only reads as far as the revisions announced so
// far: the progress line announced with a later revision (StreamRelay)
// arrives just before that revision's own notification, and the feed must
// have it when it applies that revision.
func (f *Feed) syncUpTo(ctx context.Context, upTo int64) error {
	if upTo <= 0 {
		return f.Sync(ctx)
	}
	if err := f.waitLoaded(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if upTo <= f.rev {
		return nil
	}
	return f.catchUpLocked(ctx, upTo+1)
}

// catchUpLocked applies the store's changes after f.rev and below `below`,
// in revision order. When the store can no longer account for f.rev, the
// live set is reloaded and every subscription ends with ErrFeedReset.
func (f *Feed) catchUpLocked(ctx context.Context, below int64) error {
	list, _, complete, err := f.store.Changes(ctx, f.rev)
	if err != nil {
		return fmt.Errorf("read changes after revision %d: %w", f.rev, err)
	}
	if !complete {
		return f.resetLocked(ctx)
	}
	for _, ws := range list {
		if ws.Rev >= below {
			break
		}
		f.applyLocked(ws, nil)
	}
	return nil
}

// resetLocked reloads the live set and the revision from the store and
// ends every subscription.
func (f *Feed) resetLocked(ctx context.Context) error {
	// The revision is read first: a change committed between the two
	// reads is applied again by the next catch-up, which is harmless.
	_, rev, _, err := f.store.Changes(ctx, 1<<62)
	if err != nil {
		return fmt.Errorf("reload feed revision: %w", err)
	}
	list, err := f.store.ListWorkspaces(ctx)
	if err != nil {
		return fmt.Errorf("reload workspaces: %w", err)
	}
	f.rev = rev
	f.live = make(map[string]Workspace, len(list))
	f.byAccount = map[string]map[string]struct{}{}
	for _, ws := range list {
		f.putLocked(ws)
	}
	for s := range f.subs {
		f.dropLocked(s, ErrFeedReset)
	}
	return nil
}

// applyLocked makes ws (as stored, with its revision) current and
// publishes it. saved, when not nil, is told of it: only for this
// process's own saves, because its hook records things (audit entries)
// that the writing process has already recorded.
func (f *Feed) applyLocked(ws Workspace, saved func(before, after Workspace)) {
	before := f.live[ws.ID]
	ws = f.withProgress(ws)
	f.rev = ws.Rev
	if ws.Removed {
		f.removeLocked(ws.ID)
	} else {
		f.putLocked(ws)
	}
	ch := &Change{Rev: ws.Rev, Workspace: ws}
	for s := range f.subs {
		select {
		case s.c <- ch:
		default:
			f.dropLocked(s, errSlowSubscriber)
		}
	}
	if saved != nil {
		saved(before, ws)
	}
}
