package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Change is one entry of the change feed: the workspace as it is after
// revision Rev. A Workspace with Removed set is a removal.
type Change struct {
	Rev       int64
	Workspace Workspace
}

// errSlowSubscriber is why a Subscription ends when its buffer
// filled because the subscriber did not keep up.
var errSlowSubscriber = errors.New("subscriber fell behind the change feed")

// Feed is the single path by which workspaces change. Save writes through
// the store (which assigns the next revision) and tells every subscriber, in
// revision order, under one lock, so a subscriber that has seen revision N
// has seen every change up to N.
//
// The feed keeps every live workspace in memory, which makes snapshots
// cheap; the store stays the source of truth.
type Feed struct {
	store Store

	mu   sync.Mutex
	rev  int64
	live map[string]Workspace
	subs map[*Subscription]struct{}
}

// NewFeed loads the live workspaces and the current revision from store.
func NewFeed(ctx context.Context, store Store) (*Feed, error) {
	list, err := store.ListWorkspaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("load workspaces: %w", err)
	}
	_, rev, _, err := store.Changes(ctx, 1<<62)
	if err != nil {
		return nil, fmt.Errorf("read feed revision: %w", err)
	}
	f := &Feed{store: store, rev: rev, live: make(map[string]Workspace, len(list)), subs: map[*Subscription]struct{}{}}
	for _, ws := range list {
		f.live[ws.ID] = ws
	}
	return f, nil
}

// Save stores ws with the next revision and publishes the change. A
// workspace with Removed set leaves the live set.
func (f *Feed) Save(ctx context.Context, ws Workspace) (Workspace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	saved, err := f.store.SaveWorkspace(ctx, ws)
	if err != nil {
		return ws, err
	}
	saved.Progress = ws.Progress // transient: not stored
	f.rev = saved.Rev
	if saved.Removed {
		delete(f.live, saved.ID)
	} else {
		f.live[saved.ID] = saved
	}
	ch := Change{Rev: saved.Rev, Workspace: saved}
	for s := range f.subs {
		select {
		case s.c <- ch:
		default:
			f.dropLocked(s, errSlowSubscriber)
		}
	}
	return saved, nil
}

// Get returns a live workspace from memory.
func (f *Feed) Get(id string) (Workspace, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ws, ok := f.live[id]
	return ws, ok
}

// Snapshot returns the current revision and every live workspace.
func (f *Feed) Snapshot() (int64, []Workspace) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev, f.snapshotLocked()
}

func (f *Feed) snapshotLocked() []Workspace {
	out := make([]Workspace, 0, len(f.live))
	for _, ws := range f.live {
		out = append(out, ws)
	}
	return out
}

// Rev is the current revision.
func (f *Feed) Rev() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

// Subscription delivers changes after the revision it started at. When the
// subscriber falls behind by more than its buffer, the subscription ends: C
// is closed and Err says why.
type Subscription struct {
	C <-chan Change

	c    chan Change
	feed *Feed
	err  error
}

// Err is why C was closed; nil while it is open or after Close.
func (s *Subscription) Err() error {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	return s.err
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	s.feed.dropLocked(s, nil)
}

func (f *Feed) dropLocked(s *Subscription, err error) {
	if _, ok := f.subs[s]; !ok {
		return
	}
	delete(f.subs, s)
	s.err = err
	close(s.c)
}

func (f *Feed) subscribeLocked(buffer int) *Subscription {
	if buffer < 1 {
		buffer = 1
	}
	c := make(chan Change, buffer)
	s := &Subscription{C: c, c: c, feed: f}
	f.subs[s] = struct{}{}
	return s
}

// SubscribeSnapshot atomically takes a snapshot and subscribes to every
// change after it.
func (f *Feed) SubscribeSnapshot(buffer int) (rev int64, snapshot []Workspace, sub *Subscription) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev, f.snapshotLocked(), f.subscribeLocked(buffer)
}

// SubscribeSince atomically reads the changes after since and subscribes to
// every change after them. complete is false when since is too old (or
// from the future); the caller should then use SubscribeSnapshot instead,
// and sub is nil.
func (f *Feed) SubscribeSince(ctx context.Context, since int64, buffer int) (changes []Change, rev int64, complete bool, sub *Subscription, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	list, rev, complete, err := f.store.Changes(ctx, since)
	if err != nil || !complete {
		return nil, rev, false, nil, err
	}
	changes = make([]Change, len(list))
	for i, ws := range list {
		changes[i] = Change{Rev: ws.Rev, Workspace: ws}
	}
	return changes, rev, true, f.subscribeLocked(buffer), nil
}
