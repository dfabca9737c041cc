package uibridge

import (
	"context"
	"strconv"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
)

// unfollowed hides a shared store's notifications (and everything else
// beyond core.Store): a replica on it hears of others' writes only when
// it reads the store itself.
type unfollowed struct{ core.Store }

// TestStreamSinceAheadOfThisReplica: a client saw revisions on replica A
// and reconnects to replica B with ?since= before B has heard of them.
// B reads the store instead of calling the revision "from the future":
// no snapshot, exactly the missed upserts, then the live stream without
// repeats.
func TestStreamSinceAheadOfThisReplica(t *testing.T) {
	cluster, err := pgtest.Start()
	if err != nil {
		t.Fatalf("PostgreSQL is needed: %v", err)
	}
	t.Cleanup(func() { cluster.Stop() })
	url := cluster.NewDatabase(t)
	ctx := context.Background()
	a := replicaEnv(t, openPGBench(t, url))
	b := replicaEnv(t, unfollowed{openPGBench(t, url)})
	b.t = t

	var revs []int64
	for i := range 3 {
		ws, err := a.svc.Feed().Save(ctx, testWorkspace("from-a-"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, ws.Rev)
	}
	if got := b.svc.Feed().Rev(); got >= revs[0] {
		t.Fatalf("B's feed is at %d already; the test needs it behind", got)
	}

	c := b.mustDial("?since=" + strconv.FormatInt(revs[1], 10))
	m := readMsg(t, c)
	if m.Type != "upsert" || m.Rev != revs[2] {
		t.Fatalf("first message after ?since=%d on B: %s at %d, want the upsert at %d", revs[1], m.Type, m.Rev, revs[2])
	}

	// The newest revision, which B had not applied when asked.
	c2 := b.mustDial("?since=" + strconv.FormatInt(revs[2], 10))
	next, err := a.svc.Feed().Save(ctx, testWorkspace("after"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Feed().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, conn := range []struct {
		name string
		m    Message
	}{{"first client", readMsg(t, c)}, {"second client", readMsg(t, c2)}} {
		if conn.m.Type != "upsert" || conn.m.Rev != next.Rev {
			t.Fatalf("%s: %s at %d, want the next upsert at %d (nothing repeated)", conn.name, conn.m.Type, conn.m.Rev, next.Rev)
		}
	}
	// And the one after comes next, on both: nothing was repeated.
	last, err := a.svc.Feed().Save(ctx, testWorkspace("last"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Feed().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, conn := range []*websocket.Conn{c, c2} {
		if m := readMsg(t, conn); m.Type != "upsert" || m.Rev != last.Rev {
			t.Fatalf("then %s at %d, want the upsert at %d", m.Type, m.Rev, last.Rev)
		}
	}
}
