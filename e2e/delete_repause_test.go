package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
)

// pausedWithRefusedKey makes a Daytona workspace on the farm whose
// agent-server refuses companion's key (its export answers 401), pauses
// it, and returns its id and box.
func pausedWithRefusedKey(t *testing.T, f *farm, p *proc, acct, name string) (string, string) {
	t.Helper()
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": name}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", time.Minute).BoxID
	f.box(box).key = "not-the-key"
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", time.Minute)
	return id, box
}

// checkPausedAgain: a delete that woke the paused box and then blocked
// left the box stopped at the provider, the workspace paused by
// companion with the block reason and "paused again" in its error, and
// the audit entry saying the same; nothing was deleted.
func checkPausedAgain(t *testing.T, f *farm, p *proc, id, box string) {
	t.Helper()
	ws := p.waitBlocked(id, 2*time.Minute)
	if ws.State != "paused" || !strings.Contains(ws.Error, "401") || !strings.Contains(ws.Error, "the box was paused again") {
		t.Errorf("blocked workspace %+v; want paused, naming 401 and that the box was paused again", ws)
	}
	var got struct {
		Workspace struct {
			StopReason string `json:"stop_reason"`
		}
	}
	p.must(200, "GET", "/v1/workspaces/"+id, nil, &got)
	if got.Workspace.StopReason != "companion" {
		t.Errorf("stop reason %q, want companion", got.Workspace.StopReason)
	}
	if sb, ok := f.dt.Sandbox(box); !ok || sb.State != daytona.StateStopped {
		t.Errorf("the box at the provider is %+v, want stopped", sb)
	}
	f.order(t, box, false)
	woke := false
	for _, l := range f.requests() {
		woke = woke || (strings.Contains(l, "/sandbox/"+box+"/start") && strings.HasSuffix(l, "-> 200"))
	}
	if !woke {
		t.Errorf("the box was never woken for the export:\n%s", strings.Join(f.requests(), "\n"))
	}
	e := p.deleteAudit(id)
	if !strings.HasPrefix(e.Outcome, "blocked: ") || !strings.Contains(e.Outcome, "401") || !strings.Contains(e.Outcome, "the box was paused again") {
		t.Errorf("audit %+v, want blocked, naming 401 and the re-pause", e)
	}
}

// TestDeleteBlockedPausesWokenBoxAgain: through the binary and the Daytona
// emulator, deleting a paused workspace wakes its box for the export;
// the agent-server refuses the key (401), the required export blocks the
// delete, and the box is paused again rather than left running.
func TestDeleteBlockedPausesWokenBoxAgain(t *testing.T) {
	f := newFarm(t)
	p := start(t, options{dataDir: t.TempDir()})
	acct := f.account(p)
	id, box := pausedWithRefusedKey(t, f, p, acct, "paused-key-refused")
	p.deleteConfirmed(id)
	checkPausedAgain(t, f, p, id, box)
}

// TestDeleteBlockedCrashBeforeRepause: companion is killed right after it
// journals the re-pause of a blocked delete (the box is awake, the
// workspace still deleting); after a restart the box is paused again and
// the delete stands blocked with its reason.
func TestDeleteBlockedCrashBeforeRepause(t *testing.T) {
	f := newFarm(t)
	dataDir := t.TempDir()
	p := start(t, options{dataDir: dataDir, env: []string{"COMPANION_TEST_CRASH_AT=delete:repause"}})
	acct := f.account(p)
	id, box := pausedWithRefusedKey(t, f, p, acct, "crash-before-repause")
	previewAndDeleteCrashing(p, id)
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("companion did not crash at the re-pause\n%s", p.stderr.String())
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("companion ended with %v, want SIGKILL at the crash point", p.exit)
	}
	if sb, ok := f.dt.Sandbox(box); !ok || sb.State != daytona.StateStarted {
		t.Fatalf("at the crash the box is %+v, want started (woken, not yet paused again)", sb)
	}

	p = start(t, options{dataDir: dataDir})
	checkPausedAgain(t, f, p, id, box)
}

// TestDeleteBlockedRepauseRefused: when the provider refuses to pause the
// woken box again, the blocked delete says both: why it blocked (401) and
// that the box is running and billing.
func TestDeleteBlockedRepauseRefused(t *testing.T) {
	f := newFarm(t)
	p := start(t, options{dataDir: t.TempDir()})
	acct := f.account(p)
	id, box := pausedWithRefusedKey(t, f, p, acct, "repause-refused")
	f.refuseAt("/sandbox/"+box+"/stop", 403)
	p.deleteConfirmed(id)
	ws := p.waitBlocked(id, 2*time.Minute)
	for _, want := range []string{"401", "could not be paused again", "running and billing"} {
		if !strings.Contains(ws.Error, want) {
			t.Errorf("blocked workspace's error does not say %q: %s", want, ws.Error)
		}
	}
	if ws.State != "running" {
		t.Errorf("state %q, want running (the box could not be paused)", ws.State)
	}
	if e := p.deleteAudit(id); !strings.Contains(e.Outcome, "401") || !strings.Contains(e.Outcome, "running and billing") {
		t.Errorf("audit %+v, want the block reason and the failed re-pause", e)
	}
	if f.gone(box) {
		t.Fatal("the box was deleted")
	}
	f.refuseAt("/sandbox/"+box+"/stop", 0)
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", time.Minute)
}
