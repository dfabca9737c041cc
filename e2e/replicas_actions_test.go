package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/canvasapp/companion/internal/testsupport"
)

// replicaLease is the lease TTL the replica tests run with: a killed
// replica's work is taken over this long after it died.
const replicaLease = "2s"

// dbWorkspace is a workspace as PostgreSQL has it: the truth every
// replica reads under the workspace's lock.
type dbWorkspace struct {
	State   string
	Removed bool
	Ops     int // open journal entries
}

func (rs *replicaSet) dbWorkspace(id string) dbWorkspace {
	rs.t.Helper()
	var w dbWorkspace
	if err := rs.queryRow(`SELECT state, removed_at IS NOT NULL, (SELECT count(*) FROM ops WHERE workspace_id = $1)
		FROM workspaces WHERE id = $1`, []any{id}, &w.State, &w.Removed, &w.Ops); err != nil {
		rs.t.Fatalf("read workspace %s from the database: %v", id, err)
	}
	return w
}

// queryRow reads one row from the replicas' database on a connection of
// its own, as an operator's psql would.
func (rs *replicaSet) queryRow(q string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, rs.DB)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, q, args...).Scan(dest...)
}

// waitSettled polls the database until the workspace has no open journal
// entry and a settled state (or is removed).
func (rs *replicaSet) waitSettled(id string, timeout time.Duration) dbWorkspace {
	rs.t.Helper()
	var w dbWorkspace
	testsupport.Poll(rs.t, timeout, func() error {
		w = rs.dbWorkspace(id)
		switch {
		case w.Ops > 0:
			return fmt.Errorf("workspace %s: %d open journal entries (%s)", id, w.Ops, w.State)
		case w.Removed:
			return nil
		case w.State == "pausing" || w.State == "resuming" || w.State == "deleting" || w.State == "creating":
			return fmt.Errorf("workspace %s is %s", id, w.State)
		}
		return nil
	})
	return w
}

// createOn creates a workspace through c and waits (in the database)
// until it runs; it returns the workspace id and its box.
func (rs *replicaSet) createOn(c *webClient, name string) (string, string) {
	rs.t.Helper()
	var created struct{ Workspace workspace }
	c.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": name}, &created)
	id := created.Workspace.ID
	if w := rs.waitSettled(id, 2*time.Minute); w.State != "running" {
		rs.t.Fatalf("workspace %s is %s after its create, want running", id, w.State)
	}
	var got struct{ Workspace workspace }
	c.must(200, "GET", "/v1/workspaces/"+id, nil, &got)
	box := got.Workspace.BoxID
	rs.t.Cleanup(func() {
		if containerExists(rs.t, box) {
			removeContainer(rs.t, box)
		}
	})
	return id, box
}

// pauseOn pauses a workspace through c and waits until it is paused.
func (rs *replicaSet) pauseOn(c *webClient, id string) {
	rs.t.Helper()
	c.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	if w := rs.waitSettled(id, 2*time.Minute); w.State != "paused" {
		rs.t.Fatalf("workspace %s is %s after its pause", id, w.State)
	}
}

// auditOf returns alice's audit entries of a workspace, oldest first.
func (rs *replicaSet) auditOf(c *webClient, id string) []auditEntry {
	rs.t.Helper()
	var page struct{ Entries []auditEntry }
	c.must(200, "GET", "/v1/audit?limit=500", nil, &page)
	var out []auditEntry
	for _, e := range page.Entries {
		if e.WorkspaceID == id {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b auditEntry) int { return int(a.ID - b.ID) })
	return out
}

// auditWhen polls alice's audit entries of a workspace until ok accepts
// them: an action's outcome is audited just after its last change is
// published, so a test that saw the change may read the trail too early.
func (rs *replicaSet) auditWhen(c *webClient, id string, ok func([]auditEntry) error) []auditEntry {
	rs.t.Helper()
	var audit []auditEntry
	testsupport.Poll(rs.t, 30*time.Second, func() error {
		audit = rs.auditOf(c, id)
		return ok(audit)
	})
	return audit
}

// outcomesAudited accepts a trail in which every started action of the
// given kinds has its outcome.
func outcomesAudited(kinds ...string) func([]auditEntry) error {
	return func(audit []auditEntry) error {
		for _, k := range kinds {
			started, ended := 0, 0
			for _, e := range audit {
				switch {
				case e.Action != k || strings.Contains(e.Outcome, "woken for the export"):
				case e.Outcome == "started":
					started++
				default:
					ended++
				}
			}
			if ended < started {
				return fmt.Errorf("%d %s actions started, %d outcomes audited", started, k, ended)
			}
		}
		return nil
	}
}

func countAudit(entries []auditEntry, action, outcomePrefix string) int {
	n := 0
	for _, e := range entries {
		if e.Action == action && strings.HasPrefix(e.Outcome, outcomePrefix) {
			n++
		}
	}
	return n
}

// TestReplicasConcurrentActions: 50 pause, resume and delete requests
// for one workspace, all at once, spread over both replicas. Afterwards the
// workspace is consistent with its container, and Docker saw exactly one
// call per transition that took effect: a stop per completed pause (and
// per completed delete, which stops the box it removes), a start per
// completed resume (the create's start aside), at most one destroy, and
// one only if a delete completed. Then ten confirmed deletes at once: one
// is accepted and the box is destroyed once.
func TestReplicasConcurrentActions(t *testing.T) {
	rs := startReplicas(t, 2, replicaOpts{Args: []string{"--lease-ttl", replicaLease}})
	ev := watchDocker(t, rs.Scope)
	clients := []*webClient{rs.client(rs.Replicas[0].ready.URL), rs.client(rs.Replicas[1].ready.URL)}
	id, box := rs.createOn(clients[0], "contended")
	testsupport.Until(t, 10*time.Second, "docker reports the box's start", func() bool { return ev.count(box, "start") == 1 })

	const n = 50
	type answer struct {
		kind string
		code int
	}
	answers := make([]answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		c := clients[i%2]
		kind := []string{"pause", "resume"}[(i/2)%2]
		if i%10 == 9 {
			kind = "delete"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if kind != "delete" {
				code, _, _ := c.do("POST", "/v1/workspaces/"+id+"/"+kind, nil, nil)
				answers[i] = answer{kind, code}
				return
			}
			var pv deletePreview
			code, _, _ := c.do("POST", "/v1/workspaces/"+id+"/delete-preview", nil, &pv)
			if code == 200 {
				code, _, _ = c.do("POST", "/v1/workspaces/"+id+"/delete", map[string]string{"token": pv.Token}, nil)
			}
			answers[i] = answer{kind, code}
		}()
	}
	close(start)
	wg.Wait()
	accepted := map[string]int{}
	for _, a := range answers {
		switch a.code {
		case 202:
			accepted[a.kind]++
		case 404, 409:
		default:
			t.Errorf("%s answered %d", a.kind, a.code)
		}
	}
	t.Logf("accepted: %v", accepted)
	if accepted["pause"]+accepted["resume"]+accepted["delete"] == 0 {
		t.Fatal("no request was accepted")
	}
	if accepted["delete"] > 1 {
		t.Fatalf("%d deletes were accepted for one workspace", accepted["delete"])
	}
	final := rs.waitSettled(id, 3*time.Minute)
	audit := rs.auditWhen(clients[0], id, outcomesAudited("pause", "resume", "delete"))
	for _, kind := range []string{"pause", "resume", "delete"} {
		if got := countAudit(audit, kind, "started"); got != accepted[kind] {
			t.Errorf("%d %ss started in the audit trail, %d accepted", got, kind, accepted[kind])
		}
	}
	pausedOK, resumedOK, deletedOK := countAudit(audit, "pause", "ok"), countAudit(audit, "resume", "ok"), countAudit(audit, "delete", "ok")
	// Docker's own count settles a moment after the calls returned.
	testsupport.Poll(t, 15*time.Second, func() error {
		// A delete stops the box it removes: it runs then (woken for the
		// export if it was paused).
		if got := ev.count(box, "stop"); got != pausedOK+deletedOK {
			return fmt.Errorf("docker stopped the box %d times; %d pauses and %d deletes completed", got, pausedOK, deletedOK)
		}
		if got := ev.count(box, "start"); got != 1+resumedOK {
			return fmt.Errorf("docker started the box %d times; 1 create and %d resumes completed", got, resumedOK)
		}
		if got := ev.count(box, "destroy"); got != deletedOK {
			return fmt.Errorf("docker destroyed the box %d times; %d deletes completed", got, deletedOK)
		}
		return nil
	})
	if deletedOK > 1 {
		t.Fatalf("%d deletes completed", deletedOK)
	}
	if deletedOK == 1 {
		if !final.Removed || containerExists(t, box) {
			t.Fatalf("deleted, yet the workspace is %+v and the container exists: %v", final, containerExists(t, box))
		}
		return
	}
	running := containerRunning(t, box)
	if final.Removed || (final.State == "running") != running || (final.State != "running" && final.State != "paused") {
		t.Fatalf("workspace %+v, container running: %v", final, running)
	}

	// Then ten confirmed deletes at once, each with its own preview: one
	// runs, the box is destroyed once.
	tokens := make([]string, 10)
	for i := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pv deletePreview
			if code, _, _ := clients[i%2].do("POST", "/v1/workspaces/"+id+"/delete-preview", nil, &pv); code == 200 {
				tokens[i] = pv.Token
			}
		}()
	}
	wg.Wait()
	codes := make([]int, len(tokens))
	for i, tok := range tokens {
		if tok == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, _ = clients[i%2].do("POST", "/v1/workspaces/"+id+"/delete", map[string]string{"token": tok}, nil)
		}()
	}
	wg.Wait()
	if n := countOf(codes, 202); n != 1 {
		t.Fatalf("%d of the concurrent deletes were accepted (%v), want 1", n, codes)
	}
	if w := rs.waitSettled(id, 3*time.Minute); !w.Removed {
		t.Fatalf("after the delete the workspace is %+v", w)
	}
	testsupport.Until(t, 15*time.Second, "docker reports the destroy", func() bool { return ev.count(box, "destroy") > 0 })
	if n := ev.count(box, "destroy"); n != 1 {
		t.Fatalf("the box was destroyed %d times", n)
	}
	if n := countAudit(rs.auditWhen(clients[0], id, outcomesAudited("delete")), "delete", "ok"); n != 1 {
		t.Fatalf("%d deletes completed in the audit trail", n)
	}
}

func countOf(codes []int, code int) int {
	n := 0
	for _, c := range codes {
		if c == code {
			n++
		}
	}
	return n
}

// deleteCrashing asks replica p for a preview and confirms it; p is armed
// to die at a step of the delete, maybe before it answers.
func (rs *replicaSet) deleteCrashing(p *proc, id string) {
	rs.t.Helper()
	c := rs.client(p.ready.URL)
	var pv deletePreview
	c.must(200, "POST", "/v1/workspaces/"+id+"/delete-preview", nil, &pv)
	req, err := http.NewRequest("POST", p.ready.URL+"/v1/workspaces/"+id+"/delete", strings.NewReader(`{"token":"`+pv.Token+`"}`))
	if err != nil {
		rs.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+rs.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return // it died before it answered
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		rs.t.Fatalf("delete answered %d, want 202", resp.StatusCode)
	}
}

// TestReplicaKilledMidDeleteIsTakenOver: for each step of the delete
// pipeline, the replica running a delete is killed (SIGKILL) right after
// journaling that step; the other replica takes the delete over once the
// dead one's claim and lease lapse, and finishes it. The box is destroyed
// exactly once, after its export was verified, and the box still existed
// at every crash before the provider delete; replica 1's
// companion_takeovers_total counts each journal it took over.
func TestReplicaKilledMidDeleteIsTakenOver(t *testing.T) {
	rs := startReplicas(t, 2, replicaOpts{Args: []string{"--lease-ttl", replicaLease}})
	destroys := watchDocker(t, rs.Scope)
	other := rs.client(rs.Replicas[1].ready.URL)
	takeovers := func() float64 {
		return sumOf(scrape(t, rs.Replicas[1].ready.URL+"/metrics", rs.Token), "companion_takeovers_total", nil)
	}
	for _, step := range []string{"lock", "recheck", "wake", "export", "verify", "provider_delete", "mark_deleted"} {
		t.Run(step, func(t *testing.T) {
			before := takeovers()
			id, box := rs.createOn(other, "crash-"+step)
			rs.pauseOn(other, id) // so the delete wakes the box for its export
			victim := rs.start(0, "COMPANION_TEST_CRASH_AT=delete:"+step)
			rs.deleteCrashing(victim, id)
			select {
			case <-victim.done:
			case <-time.After(2 * time.Minute):
				t.Fatalf("replica 0 did not crash at step %s\n%s", step, victim.stderr.String())
			}
			if ws, ok := victim.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("replica 0 ended with %v, want SIGKILL at the crash point", victim.exit)
			}
			rs.kill(0) // already dead: forget it
			if step != "mark_deleted" && len(destroys.times(box, "destroy")) > 0 {
				t.Fatalf("crash at %s: the box was already destroyed", step)
			}

			// Replica 1 takes over after the lease lapses.
			if w := rs.waitSettled(id, 3*time.Minute); !w.Removed {
				t.Fatalf("after the takeover the workspace is %+v, want removed", w)
			}
			testsupport.Until(t, 15*time.Second, "docker reports the destroy", func() bool { return len(destroys.times(box, "destroy")) > 0 })
			if n := len(destroys.times(box, "destroy")); n != 1 {
				t.Fatalf("the box was destroyed %d times", n)
			}
			destroyed := destroys.times(box, "destroy")[0]
			exps := rs.verifiedExportsVia(other, id)
			if len(exps) == 0 {
				t.Fatalf("deleted without a verified export listed")
			}
			audit := rs.auditWhen(other, id, func(audit []auditEntry) error {
				if countAudit(audit, "delete", "ok") == 0 {
					return fmt.Errorf("no completed delete audited yet")
				}
				return nil
			})
			var exportOK, deleteOK *auditEntry
			for i, e := range audit {
				switch {
				case e.Action == "export" && e.Outcome == "ok" && exportOK == nil:
					exportOK = &audit[i]
				case e.Action == "delete" && strings.HasPrefix(e.Outcome, "ok"):
					deleteOK = &audit[i]
				}
			}
			if exportOK == nil || deleteOK == nil || deleteOK.ExportSHA256 == nil {
				t.Fatalf("audit trail after the crash at %s: %+v", step, audit)
			}
			if destroyed.Before(exportOK.At) {
				t.Fatalf("the box was destroyed at %s, before its export was verified at %s", destroyed, exportOK.At)
			}
			if step != "lock" && step != "recheck" {
				if !strings.Contains(rs.Replicas[1].stderr.String(), "taking over an action another replica left") {
					t.Errorf("replica 1 did not say it took the delete over")
				}
				// ... and counted it, where an operator looks.
				if after := takeovers(); after <= before {
					t.Errorf("companion_takeovers_total on replica 1 went from %v to %v over a takeover", before, after)
				}
			}
		})
	}
}

// verifiedExportsVia lists the workspace's verified exports through c.
func (rs *replicaSet) verifiedExportsVia(c *webClient, id string) []exportRec {
	rs.t.Helper()
	var list struct{ Exports []exportRec }
	c.must(200, "GET", "/v1/workspaces/"+id+"/exports", nil, &list)
	var out []exportRec
	for _, e := range list.Exports {
		if e.Verified {
			out = append(out, e)
		}
	}
	return out
}

// TestReplicasRetentionDeletesOnce: both replicas run the retention tick
// every 200 ms; every due workspace is deleted exactly once (one delete
// started and completed in the audit trail, one destroy at Docker), and a
// kept one stays.
func TestReplicasRetentionDeletesOnce(t *testing.T) {
	rs := startReplicas(t, 2, replicaOpts{Args: []string{"--lease-ttl", replicaLease, "--retention-interval", "200ms"}})
	ev := watchDocker(t, rs.Scope)
	clients := []*webClient{rs.client(rs.Replicas[0].ready.URL), rs.client(rs.Replicas[1].ready.URL)}
	type made struct{ id, box string }
	var due []made
	for i := range 4 {
		c := clients[i%2]
		id, box := rs.createOn(c, fmt.Sprintf("due-%d", i))
		rs.pauseOn(c, id)
		due = append(due, made{id, box})
	}
	keptID, keptBox := rs.createOn(clients[1], "kept")
	rs.pauseOn(clients[1], keptID)
	clients[0].must(200, "PUT", "/v1/workspaces/"+keptID+"/keep", map[string]bool{"keep": true}, nil)

	clients[1].must(200, "PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": 1}, nil)
	for _, m := range due {
		testsupport.Poll(t, 3*time.Minute, func() error {
			if w := rs.dbWorkspace(m.id); !w.Removed || w.Ops > 0 {
				return fmt.Errorf("workspace %s is %s (%d open journal entries), not deleted yet", m.id, w.State, w.Ops)
			}
			return nil
		})
	}
	for _, m := range due {
		audit := rs.auditWhen(clients[0], m.id, outcomesAudited("delete"))
		if s, ok := countAudit(audit, "delete", "started"), countAudit(audit, "delete", "ok"); s != 1 || ok != 1 {
			t.Errorf("workspace %s: %d deletes started, %d completed; want one each\n%+v", m.id, s, ok, audit)
		}
		if n := countAudit(audit, "retention_warn", ""); n != 1 {
			t.Errorf("workspace %s: warned %d times, want once", m.id, n)
		}
		testsupport.Until(t, 15*time.Second, "docker reports the destroy", func() bool { return ev.count(m.box, "destroy") > 0 })
		if n := ev.count(m.box, "destroy"); n != 1 {
			t.Errorf("box %s destroyed %d times", m.box, n)
		}
	}
	// Both replicas ticked all along.
	for i, c := range clients {
		var ans retentionAnswer
		c.must(200, "GET", "/v1/accounts/local-docker/retention", nil, &ans)
		if ans.Scheduler.Ticks < 2 {
			t.Errorf("replica %d ticked %d times", i, ans.Scheduler.Ticks)
		}
	}
	if w := rs.dbWorkspace(keptID); w.Removed || !containerExists(t, keptBox) {
		t.Errorf("the kept workspace was deleted: %+v", w)
	}
}

// TestLeaseTTLFlag: a lease TTL under a second stops serve at start with
// a message naming the flag; desktop mode has no such flag.
func TestLeaseTTLFlag(t *testing.T) {
	out, err := exec.Command(companionBin, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--lease-ttl", "100ms").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--lease-ttl") {
		t.Errorf("serve --lease-ttl 100ms: %v\n%s", err, out)
	}
	out, err = exec.Command(companionBin, "desktop", "--data-dir", t.TempDir(), "--lease-ttl", "5s").CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("desktop --lease-ttl: %v\n%s", err, out)
	}
}
