package e2e

import (
	"testing"
	"time"
)

// revTracker reads a stream and checks that revisions strictly increase
// from message to message, as API.md promises on every replica.
type revTracker struct {
	s    *stream
	last int64
	seen map[int64]wsMsg // by revision
}

func track(s *stream, after int64) *revTracker {
	return &revTracker{s: s, last: after, seen: map[int64]wsMsg{}}
}

// until reads messages until pred accepts one, and returns it.
func (r *revTracker) until(t *testing.T, what string, timeout time.Duration, pred func(wsMsg) bool) wsMsg {
	t.Helper()
	return r.s.waitFor(what, timeout, func(m wsMsg) bool {
		if m.Type == "account" {
			return false
		}
		if m.Rev <= r.last {
			t.Fatalf("stream revision %d (%s) after %d: not strictly increasing", m.Rev, m.Type, r.last)
		}
		if m.Type == "snapshot" {
			t.Fatalf("unexpected snapshot at %d while following changes", m.Rev)
		}
		r.last = m.Rev
		r.seen[m.Rev] = m
		return pred(m)
	})
}

// TestReplicasShareTheStream: a client connected to replica B sees the
// upserts of a create, a pause and a resume made through replica A, in
// strictly increasing revisions; and a client that followed A, dropped,
// and reconnects to B with ?since= gets exactly what it missed: no
// snapshot, each revision it missed, as B's own clients saw them. B's
// clients get every revision A's clients get, none superseded before B
// read it.
func TestReplicasShareTheStream(t *testing.T) {
	rs := startReplicas(t, 2, replicaOpts{})
	urlA, urlB := rs.Replicas[0].ready.URL, rs.Replicas[1].ready.URL
	a := rs.client(urlA)

	onB := rs.dial(urlB, -1)
	snap := onB.next(30 * time.Second)
	if snap.Type != "snapshot" {
		t.Fatalf("first message on B: %s, want a snapshot", snap.Type)
	}
	b := track(onB, snap.Rev)
	onA := rs.dial(urlA, -1)
	snapA := onA.next(30 * time.Second)
	if snapA.Type != "snapshot" {
		t.Fatalf("first message on A: %s, want a snapshot", snapA.Type)
	}
	fromA := track(onA, snapA.Rev)

	var created struct{ Workspace workspace }
	a.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "made-on-a"}, &created)
	id := created.Workspace.ID
	running := b.until(t, "B's client sees A's create finish", 120*time.Second, upsertOf(id, "running"))
	box := running.Workspace.BoxID
	t.Cleanup(func() {
		if box != "" && containerExists(t, box) {
			removeContainer(t, box)
		}
	})

	a.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	b.until(t, "B's client sees A's pause", 60*time.Second, upsertOf(id, "paused"))
	paused := fromA.until(t, "A's client sees its pause", 60*time.Second, upsertOf(id, "paused"))
	onA.conn.Close() // the client drops, having applied paused.Rev

	a.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	running2 := b.until(t, "B's client sees A's resume", 60*time.Second, upsertOf(id, "running"))

	// B's client got every revision A's own client got, with the same
	// state: none superseded before B read it (the feed log).
	for rev, m := range fromA.seen {
		if m.Type != "upsert" || m.Workspace == nil || m.Workspace.ID != id {
			continue
		}
		if got, ok := b.seen[rev]; !ok || got.Workspace == nil || got.Workspace.State != m.Workspace.State {
			t.Errorf("A's client got revision %d (%s); B's client did not get it (%v)", rev, m.Workspace.State, ok)
		}
	}

	// The dropped client comes back on the other replica and gets each
	// revision it missed, in order, as B's live client got them.
	re := rs.dial(urlB, paused.Rev)
	var first wsMsg
	for caught := 0; ; caught++ {
		m := re.next(30 * time.Second)
		if m.Type != "upsert" || m.Workspace == nil || m.Workspace.ID != id {
			t.Fatalf("message %d after ?since=%d on B: %s, want the missed upserts of %s", caught, paused.Rev, m.Raw, id)
		}
		if caught == 0 {
			first = m
		}
		if seen, ok := b.seen[m.Rev]; !ok || seen.Workspace == nil || seen.Workspace.State != m.Workspace.State {
			t.Fatalf("catch-up gave %s at %d; B's live client had %s", m.Workspace.State, m.Rev, seen.Raw)
		}
		if m.Rev >= running2.Rev {
			break
		}
	}
	for rev := range b.seen {
		if rev > paused.Rev && rev < first.Rev {
			t.Errorf("the catch-up on B began at %d, skipping revision %d", first.Rev, rev)
		}
	}
	// Through Caddy (round robin: one replica, then the other) the same
	// ?since gets a catch-up too, never a snapshot.
	for range 2 {
		via := rs.dial(rs.Proxy, paused.Rev)
		m := via.next(30 * time.Second)
		if m.Type != "upsert" || m.Workspace == nil || m.Workspace.ID != id || m.Rev < first.Rev {
			t.Fatalf("first message after ?since=%d through the proxy: %s", paused.Rev, m.Raw)
		}
		via.conn.Close()
	}
	// Nothing is repeated after the catch-up: a new change arrives next,
	// at a higher revision.
	a.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	after := track(re, running2.Rev)
	after.until(t, "the reconnected client sees the next pause", 60*time.Second, upsertOf(id, "paused"))
}
