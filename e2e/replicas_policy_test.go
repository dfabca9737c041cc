package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/internal/testsupport"
)

// accountLease is local-docker's reconciler lease as the database has it.
func (rs *replicaSet) accountLease() (holder string, until time.Time) {
	rs.t.Helper()
	err := rs.queryRow(`SELECT holder, expires_at FROM account_leases WHERE account_id = 'local-docker'`, nil, &holder, &until)
	if err != nil && err != pgx.ErrNoRows {
		rs.t.Fatalf("read local-docker's lease: %v", err)
	}
	return holder, until
}

// TestReplicasFollowAPolicyChangeAtOnce: a retention policy enabled
// through replica A holds on replica B at once, not at B's next retention
// tick (an hour away). B lists the Docker account every 300ms: its
// reconciler records a box stopped outside companion, and B runs the
// pause of another workspace right after the policy was enabled. Both
// saves of B schedule the delete the policy asks for (read on B's stream
// and API), no save clears a schedule (no "cleared" in the audit), and
// A's retention tick deletes each workspace once when it is due.
func TestReplicasFollowAPolicyChangeAtOnce(t *testing.T) {
	const pausedFor = 20 * time.Second
	rs := startReplicas(t, 2, replicaOpts{Args: []string{"--lease-ttl", replicaLease},
		ArgsOf: map[int][]string{
			0: {"--retention-interval", "200ms", "--reconcile-interval", "1h"},
			1: {"--retention-interval", "1h", "--reconcile-interval", "300ms"}}})
	destroys := watchDocker(t, rs.Scope)

	// B must be the replica that lists the account: stop A (which
	// releases its lease), wait until B renews the lease, start A again
	// (its passes, an hour apart, find the lease taken).
	rs.Replicas[0].term()
	var first time.Time
	testsupport.Poll(t, time.Minute, func() error {
		holder, until := rs.accountLease()
		switch {
		case holder == "":
			return fmt.Errorf("nobody leases local-docker yet")
		case first.IsZero():
			first = until
			return fmt.Errorf("lease of %s seen once", holder)
		case !until.After(first):
			return fmt.Errorf("lease of %s until %v is not renewed (replica B lists every 300ms)", holder, until)
		}
		return nil
	})
	rs.start(0)
	urlA, urlB := rs.Replicas[0].ready.URL, rs.Replicas[1].ready.URL
	a, b := rs.client(urlA), rs.client(urlB)

	outside, outsideBox := rs.createOn(a, "stopped-outside")
	paused, pausedBox := rs.createOn(a, "paused-through-b")
	onB := rs.dial(urlB, -1)
	if snap := onB.next(30 * time.Second); snap.Type != "snapshot" {
		t.Fatalf("B's first message: %s", snap.Raw)
	}

	a.must(200, "PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": int(pausedFor / time.Second)}, nil)
	b.must(202, "POST", "/v1/workspaces/"+paused+"/pause", nil, nil)
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.ContainerStop(context.Background(), outsideBox, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}

	// On B's stream, every upsert of either workspace while it is paused
	// carries delete_after = paused_at + pausedFor, until it is removed.
	removed := map[string]bool{}
	scheduled := map[string]bool{}
	deleting := map[string]bool{}
	stale := map[string]bool{} // seen paused without a schedule
	onB.waitFor("both workspaces scheduled and removed, on B's stream", 3*time.Minute, func(m wsMsg) bool {
		switch {
		case m.Type == "remove" && (m.ID == outside || m.ID == paused):
			removed[m.ID] = true
		case m.Type == "upsert" && (m.Workspace.ID == outside || m.Workspace.ID == paused):
			w := m.Workspace
			if w.State == "deleting" {
				deleting[w.ID] = true
			}
			if w.State != "paused" || deleting[w.ID] {
				break
			}
			if w.PausedAt == nil || w.DeleteAfter == nil {
				if !stale[w.ID] {
					t.Errorf("B streamed %s paused without delete_after at revision %d: a save derived from a stale policy\n%s", w.ID, m.Rev, m.Raw)
				}
				stale[w.ID] = true
				break
			}
			if want := w.PausedAt.Add(pausedFor); !w.DeleteAfter.Equal(want) {
				t.Fatalf("B streamed %s with delete_after %v, want paused_at + %v = %v", w.ID, *w.DeleteAfter, pausedFor, want)
			}
			if !scheduled[w.ID] {
				scheduled[w.ID] = true
				var got struct{ Workspace workspace }
				b.must(200, "GET", "/v1/workspaces/"+w.ID, nil, &got)
				if d := got.Workspace.DeleteAfter; got.Workspace.State == "paused" && (d == nil || !d.Equal(*w.DeleteAfter)) {
					t.Fatalf("B's API has %s with delete_after %v, want %v", w.ID, d, *w.DeleteAfter)
				}
			}
		}
		return (removed[outside] || stale[outside]) && (removed[paused] || stale[paused])
	})
	if len(stale) > 0 {
		t.FailNow()
	}
	for _, id := range []string{outside, paused} {
		if !scheduled[id] {
			t.Errorf("B's stream never showed %s paused and scheduled before its removal", id)
		}
		for _, e := range rs.auditOf(a, id) {
			if e.Action == "retention_schedule" && strings.HasPrefix(e.Outcome, "cleared") {
				t.Errorf("%s's schedule was cleared: %+v", id, e)
			}
		}
		if w := rs.waitSettled(id, 2*time.Minute); !w.Removed {
			t.Errorf("%s is %+v, want removed", id, w)
		}
	}
	for _, box := range []string{outsideBox, pausedBox} {
		testsupport.Until(t, 15*time.Second, "docker reports the destroy of "+box, func() bool { return len(destroys.times(box, "destroy")) > 0 })
		if n := len(destroys.times(box, "destroy")); n != 1 {
			t.Errorf("box %s was destroyed %d times, want once", box, n)
		}
	}
	var ticks retentionAnswer
	b.must(200, "GET", "/v1/accounts/local-docker/retention", nil, &ticks)
	if ticks.Scheduler.Ticks > 1 {
		t.Errorf("B's retention ticked %d times, want only at its start (the policy must reach it without a tick)", ticks.Scheduler.Ticks)
	}
}
