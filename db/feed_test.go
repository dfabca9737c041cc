package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// TestFeedOnStore runs core's change feed on the real store, across a
// restart and a tombstone prune.
func TestFeedOnStore(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)

	feed, err := core.NewFeed(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if feed.Rev() != 0 {
		t.Fatalf("new feed at revision %d", feed.Rev())
	}
	rev, snap, sub := feed.SubscribeSnapshot(16)
	if rev != 0 || len(snap) != 0 {
		t.Fatalf("empty snapshot = %d, %v", rev, snap)
	}
	a, err := feed.Save(ctx, core.Workspace{ID: "ws_a", State: core.StateRunning})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := feed.Save(ctx, core.Workspace{ID: "ws_b", State: core.StatePaused})
	b.Removed = true
	bGone, _ := feed.Save(ctx, b)
	for _, want := range []int64{a.Rev, b.Rev, bGone.Rev} {
		select {
		case ch := <-sub.C:
			if ch.Rev != want {
				t.Fatalf("subscriber got revision %d, want %d", ch.Rev, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no change delivered")
		}
	}
	sub.Close()
	if bGone.Rev != 3 {
		t.Fatalf("revisions: %d %d %d", a.Rev, b.Rev, bGone.Rev)
	}

	// Restart: the feed picks up the revision and the live set.
	s.Close()
	s = openAt(t, path)
	defer s.Close()
	feed, err = core.NewFeed(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	rev, snap = feed.Snapshot()
	if rev != 3 || len(snap) != 1 || snap[0].ID != "ws_a" {
		t.Fatalf("after restart: rev %d, snapshot %+v", rev, snap)
	}
	changes, rev, complete, sub, err := feed.SubscribeSince(ctx, 1, 16)
	if err != nil || !complete || rev != 3 || len(changes) != 1 || changes[0].Workspace.ID != "ws_b" || !changes[0].Workspace.Removed {
		t.Fatalf("SubscribeSince(1) = %+v, rev %d, complete %v, %v", changes, rev, complete, err)
	}
	c, _ := feed.Save(ctx, core.Workspace{ID: "ws_c"})
	if ch := <-sub.C; ch.Rev != c.Rev || c.Rev != 4 {
		t.Fatalf("change after restart: %d (saved %d), want 4", ch.Rev, c.Rev)
	}
	sub.Close()

	if _, _, complete, sub, _ := feed.SubscribeSince(ctx, 99, 16); complete || sub != nil {
		t.Fatal("SubscribeSince from the future should ask for a snapshot")
	}
	// After the tombstone is pruned, a client at revision 1 missed a
	// removal it can no longer be told about.
	if err := s.PruneTombstones(ctx, time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, complete, sub, _ := feed.SubscribeSince(ctx, 1, 16); complete || sub != nil {
		t.Fatal("SubscribeSince below the floor should ask for a snapshot")
	}
	if changes, _, complete, sub, err := feed.SubscribeSince(ctx, 3, 16); err != nil || !complete || len(changes) != 1 {
		t.Fatalf("SubscribeSince(3) after prune = %v, %v, %v", changes, complete, err)
	} else {
		sub.Close()
	}
}
