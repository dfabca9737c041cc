package db_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"

	"github.com/jackc/pgx/v5"
)

// replica is one process's view of a shared PostgreSQL database: its own
// store (pool) and feed.
type replica struct {
	store *db.PGStore
	feed  *core.Feed
}

func openReplica(t *testing.T, url string) *replica {
	t.Helper()
	ctx := context.Background()
	s := openPGStore(t, url)
	f, err := core.NewFeed(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	return &replica{store: s, feed: f}
}

// follow makes r's feed follow the other replicas' writes until the test
// ends. The safety tick is an hour away: only notifications and resyncs
// can deliver within a test.
func (r *replica) follow(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.feed.Follow(ctx, r.store, core.RealClock{}, time.Hour, nil)
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// next is the subscription's next change, failing after a while.
func next(t *testing.T, sub *core.Subscription) core.Change {
	t.Helper()
	select {
	case ch, ok := <-sub.C:
		if !ok {
			t.Fatalf("subscription ended: %v", sub.Err())
		}
		return *ch
	case <-time.After(20 * time.Second):
		t.Fatal("no change arrived")
	}
	return core.Change{}
}

// collectUntil reads changes until one at rev or later, checking that
// revisions strictly increase, and returns the workspaces last seen by id.
func collectUntil(t *testing.T, sub *core.Subscription, after, rev int64) map[string]core.Workspace {
	t.Helper()
	seen := map[string]core.Workspace{}
	last := after
	for last < rev {
		ch := next(t, sub)
		if ch.Rev <= last {
			t.Fatalf("revision %d after %d: not strictly increasing", ch.Rev, last)
		}
		if ch.Rev != ch.Workspace.Rev {
			t.Fatalf("change at revision %d carries a workspace of revision %d", ch.Rev, ch.Workspace.Rev)
		}
		last = ch.Rev
		seen[ch.Workspace.ID] = ch.Workspace
	}
	return seen
}

// TestFeedFollowsAnotherReplica: a subscriber of replica B's feed receives
// what replica A saves, in revision order, each as soon as A's
// notification arrives (the safety tick never fires here).
func TestFeedFollowsAnotherReplica(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openReplica(t, url), openReplica(t, url)
	b.follow(t)
	_, _, sub := b.feed.SubscribeSnapshot(64)
	defer sub.Close()

	for i := range 5 {
		ws, err := a.feed.Save(ctx, core.Workspace{ID: fmt.Sprintf("ws_%d", i), Name: "from A", State: core.StateRunning})
		if err != nil {
			t.Fatal(err)
		}
		ch := next(t, sub)
		if ch.Rev != ws.Rev || ch.Workspace.ID != ws.ID || ch.Workspace.Name != "from A" {
			t.Fatalf("B's subscriber got %d %+v, want A's save %d of %s", ch.Rev, ch.Workspace, ws.Rev, ws.ID)
		}
	}
	// A burst: notifications may coalesce, order and the end state may not.
	var last core.Workspace
	for i := range 20 {
		ws := core.Workspace{ID: fmt.Sprintf("ws_%d", i%7), State: core.StatePaused, Name: fmt.Sprintf("burst %d", i)}
		if i%5 == 4 {
			ws.Removed = true
		}
		var err error
		if last, err = a.feed.Save(ctx, ws); err != nil {
			t.Fatal(err)
		}
	}
	collectUntil(t, sub, 5, last.Rev)
	if b.feed.Rev() != a.feed.Rev() {
		t.Fatalf("B at revision %d, A at %d", b.feed.Rev(), a.feed.Rev())
	}
	_, wantList := a.feed.Snapshot()
	for _, want := range wantList {
		if got, ok := b.feed.Get(want.ID); !ok || got.Rev != want.Rev || got.Name != want.Name {
			t.Errorf("B holds %+v (%v), A %+v", got, ok, want)
		}
	}
	if b.feed.Len() != a.feed.Len() {
		t.Errorf("B holds %d live workspaces, A %d", b.feed.Len(), a.feed.Len())
	}
}

// TestFeedLocalSaveAfterAnotherReplicasWrites: B has not heard of A's
// saves yet when it saves itself; its subscribers get A's changes first,
// then B's own, with no revision skipped or repeated.
func TestFeedLocalSaveAfterAnotherReplicasWrites(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openReplica(t, url), openReplica(t, url) // B does not follow
	_, _, sub := b.feed.SubscribeSnapshot(64)
	defer sub.Close()
	x, _ := a.feed.Save(ctx, core.Workspace{ID: "ws_x", State: core.StateRunning})
	y, _ := a.feed.Save(ctx, core.Workspace{ID: "ws_y", State: core.StateRunning})
	z, err := b.feed.Save(ctx, core.Workspace{ID: "ws_z", State: core.StateRunning})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []core.Workspace{x, y, z} {
		if ch := next(t, sub); ch.Rev != want.Rev || ch.Workspace.ID != want.ID {
			t.Fatalf("B's subscriber got %s at %d, want %s at %d", ch.Workspace.ID, ch.Rev, want.ID, want.Rev)
		}
	}
	if _, ok := b.feed.Get("ws_x"); !ok || b.feed.Rev() != z.Rev {
		t.Fatalf("B's feed: has ws_x %v, revision %d, want %d", ok, b.feed.Rev(), z.Rev)
	}
}

// TestFeedSubscribeSinceOnAnotherReplica: a client that saw revision N
// through replica A and reconnects to B with since=N gets exactly what
// came after N, even before B heard of it.
func TestFeedSubscribeSinceOnAnotherReplica(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openReplica(t, url), openReplica(t, url) // B does not follow
	var revs []int64
	for i := range 4 {
		ws, err := a.feed.Save(ctx, core.Workspace{ID: fmt.Sprintf("ws_%d", i), State: core.StateRunning})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, ws.Rev)
	}
	// B's feed is at 0; the client saw revs[1] on A.
	changes, rev, complete, sub, err := b.feed.SubscribeSince(ctx, revs[1], 16)
	if err != nil || !complete {
		t.Fatalf("SubscribeSince(%d) on B: complete %v, err %v", revs[1], complete, err)
	}
	defer sub.Close()
	if rev != revs[3] || len(changes) != 2 || changes[0].Rev != revs[2] || changes[1].Rev != revs[3] {
		t.Fatalf("SubscribeSince(%d) on B: rev %d, changes %+v; want exactly %v", revs[1], rev, changes, revs[2:])
	}
	// The newest revision, which B's feed had not reached: complete, empty.
	changes, rev, complete, sub2, err := b.feed.SubscribeSince(ctx, revs[3], 16)
	if err != nil || !complete || len(changes) != 0 || rev != revs[3] {
		t.Fatalf("SubscribeSince(newest) on B: %v %d %v %v", changes, rev, complete, err)
	}
	sub2.Close()
	// Beyond what any replica wrote: from the future.
	if _, _, complete, _, err := b.feed.SubscribeSince(ctx, revs[3]+1, 16); err != nil || complete {
		t.Fatalf("SubscribeSince(future) on B: complete %v, err %v", complete, err)
	}
	// The live part continues right after the catch-up.
	w, _ := a.feed.Save(ctx, core.Workspace{ID: "ws_after", State: core.StateRunning})
	if err := b.feed.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if ch := next(t, sub); ch.Rev != w.Rev {
		t.Fatalf("after catch-up the subscription delivered %d, want %d", ch.Rev, w.Rev)
	}
}

// TestFeedListenerReconnects: when B's listening connection is killed,
// the changes A commits meanwhile reach B's subscribers once it has
// listened again (its resync), without waiting for the safety tick.
func TestFeedListenerReconnects(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openReplica(t, url), openReplica(t, url)
	b.follow(t)
	_, _, sub := b.feed.SubscribeSnapshot(64)
	defer sub.Close()

	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	listener := func() (pid int) {
		err := admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, db.ListenerName(b.store)).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	var first int
	testsupport.Until(t, 20*time.Second, "B listens", func() bool { first = listener(); return first != 0 })
	w, _ := a.feed.Save(ctx, core.Workspace{ID: "ws_before", State: core.StateRunning})
	if ch := next(t, sub); ch.Rev != w.Rev {
		t.Fatalf("got %d, want %d", ch.Rev, w.Rev)
	}

	var killed bool
	if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, first).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate B's listener: %v %v", killed, err)
	}
	var last core.Workspace
	for i := range 3 {
		if last, err = a.feed.Save(ctx, core.Workspace{ID: fmt.Sprintf("ws_during_%d", i), State: core.StateRunning}); err != nil {
			t.Fatal(err)
		}
	}
	got := collectUntil(t, sub, w.Rev, last.Rev)
	if len(got) != 3 {
		t.Fatalf("B's subscriber got %v, want the three saves made while it did not listen", got)
	}
	testsupport.Until(t, 20*time.Second, "B listens again", func() bool { pid := listener(); return pid != 0 && pid != first })
	w, _ = a.feed.Save(ctx, core.Workspace{ID: "ws_after", State: core.StateRunning})
	if ch := next(t, sub); ch.Rev != w.Rev {
		t.Fatalf("after reconnecting: got %d, want %d", ch.Rev, w.Rev)
	}
}

// TestFeedResetWhenHistoryPruned: B was cut off while A removed
// workspaces and their tombstones were pruned past B's revision. B's
// catch-up cannot be exact, so it reloads and ends its subscriptions
// with ErrFeedReset; its live set is then A's.
func TestFeedResetWhenHistoryPruned(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a := openReplica(t, url)
	keep, _ := a.feed.Save(ctx, core.Workspace{ID: "ws_keep", State: core.StateRunning})
	gone, _ := a.feed.Save(ctx, core.Workspace{ID: "ws_gone", State: core.StateRunning})
	b := openReplica(t, url) // B does not follow
	_, _, sub := b.feed.SubscribeSnapshot(64)
	gone.Removed = true
	if _, err := a.feed.Save(ctx, gone); err != nil {
		t.Fatal(err)
	}
	keep.Name = "renamed"
	keep, _ = a.feed.Save(ctx, keep)
	if err := a.store.PruneTombstones(ctx, time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.feed.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-sub.C:
		if ok {
			t.Fatal("a subscription went on past a gap in history")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription did not end")
	}
	if !errors.Is(sub.Err(), core.ErrFeedReset) {
		t.Fatalf("subscription ended with %v, want ErrFeedReset", sub.Err())
	}
	if _, ok := b.feed.Get("ws_gone"); ok {
		t.Error("B still holds the removed workspace")
	}
	if got, _ := b.feed.Get("ws_keep"); got.Name != "renamed" || b.feed.Rev() != keep.Rev {
		t.Errorf("B after reset: %+v at revision %d, want the rename at %d", got, b.feed.Rev(), keep.Rev)
	}
}

// silent is a notifier that never announces anything, as when every
// notification is lost.
type silent struct{}

func (silent) WatchChanges(ctx context.Context, _ func(int64), _ func(error)) { <-ctx.Done() }

// TestFeedSafetyTick: with every notification lost, B still catches up
// with A's saves on its periodic tick (the injected clock's).
func TestFeedSafetyTick(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	url := pgtest.NewDatabase(t)
	a, b := openReplica(t, url), openReplica(t, url)
	clk := fakeclock.New(time.Now())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.feed.Follow(ctx, silent{}, clk, core.FollowEvery, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
	_, _, sub := b.feed.SubscribeSnapshot(16)
	defer sub.Close()
	w, err := a.feed.Save(ctx, core.Workspace{ID: "ws_unannounced", State: core.StateRunning})
	if err != nil {
		t.Fatal(err)
	}
	if !clk.WaitForWaiters(1, 20*time.Second) {
		t.Fatal("the follower set no timer")
	}
	if b.feed.Rev() != 0 {
		t.Fatalf("B moved to %d before its tick", b.feed.Rev())
	}
	clk.Advance(core.FollowEvery)
	if ch := next(t, sub); ch.Rev != w.Rev || ch.Workspace.ID != w.ID {
		t.Fatalf("after the tick B published %s at %d, want %s at %d", ch.Workspace.ID, ch.Rev, w.ID, w.Rev)
	}
}
