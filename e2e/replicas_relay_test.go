package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// progressOf is the progress field of an upsert (the e2e workspace type
// leaves it out).
func progressOf(t *testing.T, m wsMsg) string {
	t.Helper()
	var w struct {
		Workspace struct {
			Progress string `json:"progress"`
		} `json:"workspace"`
	}
	if err := json.Unmarshal(m.Raw, &w); err != nil {
		t.Fatalf("upsert %s: %v", m.Raw, err)
	}
	return w.Workspace.Progress
}

// lifeOf reads a stream until workspace id is removed and returns its
// upserts by revision; revisions must increase strictly.
func lifeOf(t *testing.T, s *stream, after int64, id, what string) map[int64]wsMsg {
	t.Helper()
	tr := track(s, after)
	got := map[int64]wsMsg{}
	tr.until(t, what, 3*time.Minute, func(m wsMsg) bool {
		if m.Type == "upsert" && m.Workspace.ID == id {
			got[m.Rev] = m
		}
		return m.Type == "remove" && m.ID == id
	})
	return got
}

// TestReplicasRelayTransientMessages: what is streamed but not stored
// reaches the clients of every replica. A client on replica B sees the
// progress lines of a delete run through replica A, each with the revision
// A's own client saw it at, and none after the delete's last upsert; it
// sees the retention warning of a workspace that A's retention tick
// deletes (B's tick does not run meanwhile). Bob's client on B sees none
// of it: his own workspace arrives, alice's never.
func TestReplicasRelayTransientMessages(t *testing.T) {
	rs := startReplicas(t, 2, replicaOpts{Args: []string{"--lease-ttl", replicaLease},
		ArgsOf: map[int][]string{0: {"--retention-interval", "200ms"},
			// B ticks only at its start, so A's tick is the one that
			// warns. B learns of A's policy from its announcement, so its
			// reconciler's saves keep the delete_after A derives.
			1: {"--retention-interval", "1h", "--reconcile-interval", "300ms"}}})
	urlA, urlB := rs.Replicas[0].ready.URL, rs.Replicas[1].ready.URL
	a := rs.client(urlA)

	addUser(t, t.TempDir(), "bob", "bob-password-22", "--database-file", rs.dbFile)
	bob := newWebClient(t, urlB)
	bob.login("bob", "bob-password-22")
	bobS, code := bob.dialWS(-1, nil)
	if code != 101 {
		t.Fatalf("bob's stream on B: handshake status %d", code)
	}
	if m := bobS.next(30 * time.Second); m.Type != "snapshot" {
		t.Fatalf("bob's first message: %s", m.Raw)
	}

	// A delete through A: its export reports progress.
	id, _ := rs.createOn(a, "deleted-through-a")
	onA, onB := rs.dial(urlA, -1), rs.dial(urlB, -1)
	snapA, snapB := onA.next(30*time.Second), onB.next(30*time.Second)
	if snapA.Type != "snapshot" || snapB.Type != "snapshot" {
		t.Fatalf("first messages: %s on A, %s on B; want snapshots", snapA.Type, snapB.Type)
	}
	var pv deletePreview
	a.must(200, "POST", "/v1/workspaces/"+id+"/delete-preview", nil, &pv)
	a.must(202, "POST", "/v1/workspaces/"+id+"/delete", map[string]string{"token": pv.Token}, nil)
	onBLife := lifeOf(t, onB, snapB.Rev, id, "B's client sees the delete through A end")
	onALife := lifeOf(t, onA, snapA.Rev, id, "A's client sees its delete end")
	lines, lastRev, lastLine := 0, int64(0), ""
	for rev, m := range onBLife {
		p := progressOf(t, m)
		if rev > lastRev {
			lastRev, lastLine = rev, p
		}
		if p == "" {
			continue
		}
		lines++
		if !strings.HasPrefix(p, "export before delete: ") {
			t.Errorf("B's progress at revision %d: %q", rev, p)
		}
		if mA, ok := onALife[rev]; !ok || progressOf(t, mA) != p {
			t.Errorf("B's revision %d carries progress %q; A's client saw %q at that revision (%v)", rev, p, progressOf(t, mA), ok)
		}
	}
	if lines == 0 {
		t.Errorf("B's client saw no progress line of the delete through A (%d upserts)", len(onBLife))
	}
	if lastLine != "" {
		t.Errorf("B's last upsert of the deleted workspace (revision %d) still carries progress %q", lastRev, lastLine)
	}

	// Retention: A's tick warns and deletes; B's clients see the warning.
	// The policy is enabled right after the pause: the pause may still
	// hold the workspace's lock, and the workspace is scheduled once it
	// lets go.
	due, _ := rs.createOn(a, "due-for-retention")
	rs.pauseOn(a, due)
	a.must(200, "PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": 1}, nil)
	testsupport.Poll(t, 2*time.Minute, func() error {
		if w := rs.dbWorkspace(due); !w.Removed || w.Ops > 0 {
			var ws struct{ Workspace workspace }
			a.do("GET", "/v1/workspaces/"+due, nil, &ws)
			_, raw, _ := a.do("GET", "/v1/accounts/local-docker/retention", nil, nil)
			return fmt.Errorf("workspace %s is %s (%d open journal entries, delete_after %v), not deleted yet; A's retention: %s", due, w.State, w.Ops, ws.Workspace.DeleteAfter, raw)
		}
		return nil
	})
	warned, removed := false, false
	onB.waitFor("B's client sees A's retention warning and delete", 3*time.Minute, func(m wsMsg) bool {
		switch {
		case m.Type == "notice":
			var n struct {
				Kind        string     `json:"kind"`
				WorkspaceID string     `json:"workspace_id"`
				DeleteAfter *time.Time `json:"delete_after"`
			}
			if err := json.Unmarshal(m.Raw, &n); err != nil || n.Kind != "retention_warning" || n.WorkspaceID != due || n.DeleteAfter == nil {
				t.Errorf("notice on B: %s (%v)", m.Raw, err)
			}
			if warned {
				t.Errorf("the warning arrived twice on B")
			}
			warned = true
		case m.Type == "remove" && m.ID == due:
			if !warned {
				t.Errorf("B's client saw the retention delete before its warning")
			}
			removed = true
		}
		return removed
	})
	var ticks retentionAnswer
	rs.client(urlB).must(200, "GET", "/v1/accounts/local-docker/retention", nil, &ticks)
	if ticks.Scheduler.Ticks > 1 {
		t.Errorf("B's retention ticked %d times, want only at its start (A must be the one that warned)", ticks.Scheduler.Ticks)
	}

	// Bob's stream on B: his own workspace arrives; nothing of alice's did.
	bobID, _ := rs.createOn(bob, "bobs-own")
	bobS.waitFor("bob's own workspace", time.Minute, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace.ID == bobID
	})
	seen := bobS.seen.String()
	for _, leak := range []string{id, due, "retention_warning", "export before delete"} {
		if strings.Contains(seen, leak) {
			t.Errorf("bob's stream on B carried %q:\n%s", leak, seen)
		}
	}
}
