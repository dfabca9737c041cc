package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// cheap; the store stays the source of truth. Loading them takes time in
// proportion to the store, so a feed can be made unloaded (NewLazyFeed)
// and loaded once the program serves: until Load has finished, every
// method waits for it, so nothing ever sees a partial set.
type Feed struct {
	store Store

	loadOnce sync.Once
	loaded   chan struct{} // closed when Load has finished
	loadErr  error         // set before loaded closes

	mu   sync.Mutex
	rev  int64
	live map[string]Workspace
	// byAccount indexes live by account, so that a reconciler pass costs
	// what the account holds, not what the store holds.
	byAccount map[string]map[string]struct{}
	subs      map[*Subscription]struct{}

	// derive, if set, fills fields computed from the rest of a workspace
	// (retention's delete_after) before each save; saved is told of each
	// save's before and after. Both run under mu. Set before first use.
	derive func(Workspace) Workspace
	saved  func(before, after Workspace)
	// prepare, if set, is called by Save before it takes mu, with the
	// workspace to save: it may bring what derive reads up to date (a
	// policy another replica changed), outside the feed's lock.
	prepare func(ctx context.Context, ws Workspace)

	// pending are progress lines other processes announced with their
	// revisions (StreamRelay), by revision, until the feed applies that
	// revision: it then carries the line, like the writer's own copy.
	pmu     sync.Mutex
	pending map[int64]pendingProgress
}

// pendingProgress is a progress line announced for one revision.
type pendingProgress struct{ id, line string }

// maxPendingProgress bounds the lines waiting for their revision; the
// feed applies them within moments, so more means they will never be.
const maxPendingProgress = 4096

// NewFeed loads the live workspaces and the current revision from store.
func NewFeed(ctx context.Context, store Store) (*Feed, error) {
	f := NewLazyFeed(store)
	if err := f.Load(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// NewLazyFeed returns a feed that reads nothing until Load is called.
func NewLazyFeed(store Store) *Feed {
	return &Feed{store: store, loaded: make(chan struct{}), live: map[string]Workspace{},
		byAccount: map[string]map[string]struct{}{}, subs: map[*Subscription]struct{}{}}
}

// Load reads the live workspaces and the current revision; later calls
// return the first call's outcome. No change can happen meanwhile: Save
// waits for Load too. A failed Load leaves the feed unusable (every method
// fails or returns nothing), and the caller should stop.
func (f *Feed) Load(ctx context.Context) error {
	f.loadOnce.Do(func() {
		defer close(f.loaded)
		_, rev, _, err := f.store.Changes(ctx, 1<<62)
		if err != nil {
			f.loadErr = fmt.Errorf("read feed revision: %w", err)
			return
		}
		list, err := f.store.ListWorkspaces(ctx)
		if err != nil {
			f.loadErr = fmt.Errorf("load workspaces: %w", err)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.rev = rev
		f.live = make(map[string]Workspace, len(list))
		for _, ws := range list {
			f.putLocked(ws)
		}
	})
	return f.loadErr
}

// Loaded is closed once Load has finished (successfully or not).
func (f *Feed) Loaded() <-chan struct{} { return f.loaded }

// waitLoaded waits for Load, or for ctx.
func (f *Feed) waitLoaded(ctx context.Context) error {
	select {
	case <-f.loaded:
		return f.loadErr
	default:
	}
	select {
	case <-f.loaded:
		return f.loadErr
	case <-ctx.Done():
		return fmt.Errorf("waiting for the workspaces to load: %w", ctx.Err())
	}
}

// lock is for methods without a context: it waits for Load however long
// it takes (it ends, or the program stops), then takes mu.
func (f *Feed) lock() error {
	<-f.loaded
	f.mu.Lock()
	return f.loadErr
}

// Save stores ws with the next revision and publishes the change. A
// workspace with Removed set leaves the live set.
func (f *Feed) Save(ctx context.Context, ws Workspace) (Workspace, error) {
	return f.saveVia(ctx, ws, f.store.SaveWorkspace)
}

// saveVia is Save with the store's save done by save (the store's
// SaveWorkspace with more in its transaction, as a lease's release).
func (f *Feed) saveVia(ctx context.Context, ws Workspace, save func(context.Context, Workspace) (Workspace, error)) (Workspace, error) {
	if err := f.waitLoaded(ctx); err != nil {
		return ws, err
	}
	if f.prepare != nil {
		f.prepare(ctx, ws)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.saveLockedVia(ctx, ws, save)
}

func (f *Feed) saveLocked(ctx context.Context, ws Workspace) (Workspace, error) {
	return f.saveLockedVia(ctx, ws, f.store.SaveWorkspace)
}

func (f *Feed) saveLockedVia(ctx context.Context, ws Workspace, save func(context.Context, Workspace) (Workspace, error)) (Workspace, error) {
	if f.derive != nil {
		ws = f.derive(ws)
	}
	before := f.live[ws.ID]
	saved, err := save(ctx, ws)
	if err != nil {
		return ws, err
	}
	saved.Progress = ws.Progress // transient: not stored
	if saved.Rev > f.rev+1 {
		// Another process sharing the store wrote in between: publish
		// its changes first, so subscribers see revisions in order.
		err := f.catchUpLocked(ctx, saved.Rev)
		if err != nil || saved.Rev <= f.rev {
			// Ours is stored: a reset has loaded it, or the follower
			// publishes it with the rest once the store answers. Never
			// skip past the changes that could not be read.
			if err != nil {
				slog.Warn("change feed could not read changes written elsewhere before its own", "rev", saved.Rev, "err", err)
			}
			if f.saved != nil {
				f.saved(before, saved)
			}
			return saved, nil
		}
	}
	f.applyLocked(saved, f.saved)
	return saved, nil
}

func (f *Feed) putLocked(ws Workspace) {
	if old, ok := f.live[ws.ID]; ok && old.AccountID != ws.AccountID {
		f.removeLocked(ws.ID)
	}
	f.live[ws.ID] = ws
	ids := f.byAccount[ws.AccountID]
	if ids == nil {
		ids = map[string]struct{}{}
		f.byAccount[ws.AccountID] = ids
	}
	ids[ws.ID] = struct{}{}
}

func (f *Feed) removeLocked(id string) {
	old, ok := f.live[id]
	if !ok {
		return
	}
	delete(f.live, id)
	if ids := f.byAccount[old.AccountID]; ids != nil {
		delete(ids, id)
		if len(ids) == 0 {
			delete(f.byAccount, old.AccountID)
		}
	}
}

// atRisk returns the live workspaces marked AtRisk.
func (f *Feed) atRisk() []Workspace {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Workspace
	for _, ws := range f.live {
		if ws.AtRisk {
			out = append(out, ws)
		}
	}
	return out
}

// OfAccount returns the live workspaces of one account.
func (f *Feed) OfAccount(accountID string) []Workspace {
	_ = f.lock()
	defer f.mu.Unlock()
	ids := f.byAccount[accountID]
	out := make([]Workspace, 0, len(ids))
	for id := range ids {
		out = append(out, f.live[id])
	}
	return out
}

// owners returns the distinct owners of the live workspaces.
func (f *Feed) owners() []string {
	_ = f.lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, ws := range f.live {
		if !seen[ws.Owner] {
			seen[ws.Owner] = true
			out = append(out, ws.Owner)
		}
	}
	return out
}

// idsOwnedBy returns the ids of the live workspaces whose owner match
// accepts, without copying the workspaces. match runs under the feed's
// lock.
func (f *Feed) idsOwnedBy(match func(owner string) bool) []string {
	_ = f.lock()
	defer f.mu.Unlock()
	var out []string
	for id, ws := range f.live {
		if match(ws.Owner) {
			out = append(out, id)
		}
	}
	return out
}

// Get returns a live workspace from memory.
func (f *Feed) Get(id string) (Workspace, bool) {
	_ = f.lock() // a failed load leaves live empty
	defer f.mu.Unlock()
	ws, ok := f.live[id]
	return ws, ok
}

// Snapshot returns the current revision and every live workspace.
func (f *Feed) Snapshot() (int64, []Workspace) {
	_ = f.lock()
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
	_ = f.lock()
	defer f.mu.Unlock()
	return f.rev
}

// Subscription delivers changes after the revision it started at. When the
// subscriber falls behind by more than its buffer, the subscription ends: C
// is closed and Err says why.
type Subscription struct {
	C <-chan *Change

	c    chan *Change
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
	c := make(chan *Change, buffer)
	s := &Subscription{C: c, c: c, feed: f}
	f.subs[s] = struct{}{}
	return s
}

// SubscribeSnapshot atomically takes a snapshot and subscribes to every
// change after it.
func (f *Feed) SubscribeSnapshot(buffer int) (rev int64, snapshot []Workspace, sub *Subscription) {
	_ = f.lock()
	defer f.mu.Unlock()
	return f.rev, f.snapshotLocked(), f.subscribeLocked(buffer)
}

// SubscribeSince atomically reads the changes after since and subscribes to
// every change after them. complete is false when since is too old (or
// from the future); the caller should then use SubscribeSnapshot instead,
// and sub is nil.
func (f *Feed) SubscribeSince(ctx context.Context, since int64, buffer int) (changes []Change, rev int64, complete bool, sub *Subscription, err error) {
	if err := f.waitLoaded(ctx); err != nil {
		return nil, 0, false, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// One read serves both the subscriber and the feed: changes another
	// process wrote beyond f.rev are applied (and published) first, so
	// the subscription continues exactly where the returned list ends.
	from := min(since, f.rev)
	list, storeRev, complete, err := f.store.Changes(ctx, from)
	if err != nil {
		return nil, storeRev, false, nil, err
	}
	if !complete {
		if from == f.rev {
			if err := f.resetLocked(ctx); err != nil {
				return nil, 0, false, nil, err
			}
		}
		return nil, storeRev, false, nil, nil
	}
	for _, ws := range list {
		if ws.Rev > f.rev {
			f.applyLocked(ws, nil)
		}
	}
	if since > f.rev {
		return nil, f.rev, false, nil, nil // from the future
	}
	for _, ws := range list {
		if ws.Rev > since {
			changes = append(changes, Change{Rev: ws.Rev, Workspace: ws})
		}
	}
	return changes, f.rev, true, f.subscribeLocked(buffer), nil
}

// Len is the number of live workspaces.
func (f *Feed) Len() int {
	_ = f.lock()
	defer f.mu.Unlock()
	return len(f.live)
}

// noteProgress records the progress line announced with revision rev of
// workspace id, for when the feed applies rev. A line for a revision the
// feed applied already (read from the store before the announcement came)
// is dropped at the next change: it is never shown after a later
// revision, and the action's next line follows within a second.
func (f *Feed) noteProgress(rev int64, id, line string) {
	if rev <= 0 || id == "" || line == "" {
		return
	}
	f.pmu.Lock()
	defer f.pmu.Unlock()
	if f.pending == nil {
		f.pending = map[int64]pendingProgress{}
	}
	if len(f.pending) >= maxPendingProgress {
		return
	}
	f.pending[rev] = pendingProgress{id: id, line: line}
}

// withProgress gives ws, about to be applied, the progress line announced
// for its revision, if it carries none, and forgets the lines of every
// revision up to it.
func (f *Feed) withProgress(ws Workspace) Workspace {
	f.pmu.Lock()
	defer f.pmu.Unlock()
	if len(f.pending) == 0 {
		return ws
	}
	if p, ok := f.pending[ws.Rev]; ok && p.id == ws.ID && !ws.Removed && ws.Progress == "" {
		ws.Progress = p.line
	}
	for rev := range f.pending {
		if rev <= ws.Rev {
			delete(f.pending, rev)
		}
	}
	return ws
}
