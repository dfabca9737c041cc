package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// TestDeleteExportsBeforeProviderDelete: through the binary, the Daytona
// emulator and a real agent-server process behind the box's preview port,
// a delete of a paused workspace says in its preview what it exports
// (and that the box is woken), then wakes the box, exports and verifies,
// and only then deletes the box at the provider (order taken from the
// request log). The verified export is listed under the workspace, and
// the delete's audit entry carries the archive's SHA-256.
func TestDeleteExportsBeforeProviderDelete(t *testing.T) {
	f := newFarm(t)
	p := start(t, options{dataDir: t.TempDir()})
	acct := f.account(p)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "exported-then-deleted"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", time.Minute).BoxID
	f.converse(t, box)
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", time.Minute)

	pv := p.deleteConfirmed(id)
	if !pv.Export.Will || !pv.Export.Wake || pv.Export.Mode != "required" || pv.Export.Format != "tar.gz" || pv.Export.ArchivePath != "/workspace" {
		t.Errorf("preview's export plan: %+v", pv.Export)
	}
	all := strings.Join(append(pv.Lost, pv.Survives...), "\n")
	for _, want := range []string{"trajectory", "tar.gz", "woken", "outside /workspace", "pushed", "blocked"} {
		if !strings.Contains(all, want) && !strings.Contains(strings.Join(pv.Export.Captures, "\n"), want) {
			t.Errorf("preview does not mention %q:\n%s\n%v", want, all, pv.Export.Captures)
		}
	}
	if strings.Contains(all, "not available yet") {
		t.Errorf("preview still says export is not available: %s", all)
	}
	p.waitRemoved(id, 2*time.Minute)
	if !f.gone(box) {
		t.Fatalf("box %s still exists at the provider", box)
	}
	f.order(t, box, true)
	exps := p.verifiedExports(id)
	if len(exps) != 1 || exps[0].ArchiveSHA256 == nil {
		t.Fatalf("verified exports of the deleted workspace: %+v", exps)
	}
	traj := false
	for _, fl := range exps[0].Files {
		traj = traj || fl.Kind == "trajectory"
	}
	if !traj {
		t.Errorf("the export holds no trajectory: %+v", exps[0].Files)
	}
	e := p.deleteAudit(id)
	if e.Outcome != "ok" || e.ExportSHA256 == nil || *e.ExportSHA256 != *exps[0].ArchiveSHA256 {
		t.Fatalf("delete audit entry %+v, want ok with the archive's SHA-256 %s", e, *exps[0].ArchiveSHA256)
	}
}

// TestDeleteBlockedAndProceeding: a required export that cannot be
// confirmed (agent-server 401: the key is refused; 404: the archive path
// is missing) blocks the delete: the box stays, the workspace returns to
// its real state with "delete blocked: …", the audit says "blocked: …".
// Nothing to archive (400) proceeds with the trajectories; 429 then 503
// (with Retry-After) then success proceeds; a best-effort account deletes
// even when the agent-server refuses the key, and the preview says so.
func TestDeleteBlockedAndProceeding(t *testing.T) {
	f := newFarm(t)
	p := start(t, options{dataDir: t.TempDir()})
	acct := f.account(p)
	mk := func(name string) (string, string) {
		var created struct{ Workspace workspace }
		p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": name}, &created)
		return created.Workspace.ID, p.waitState(created.Workspace.ID, "running", time.Minute).BoxID
	}
	blocked := []struct {
		name  string
		setup boxSetup
		want  string
	}{
		{"key-refused", boxSetup{key: "not-the-key"}, "401"},
		{"path-missing", boxSetup{archiveAt: "missing"}, "404"},
	}
	for _, c := range blocked {
		id, box := mk(c.name)
		*f.box(box) = c.setup
		p.deleteConfirmed(id)
		ws := p.waitBlocked(id, 2*time.Minute)
		if ws.State != "running" || !strings.Contains(ws.Error, c.want) || !strings.Contains(ws.Error, "best_effort") {
			t.Errorf("%s: blocked workspace %+v; want running, naming %s and what to do", c.name, ws, c.want)
		}
		if f.gone(box) {
			t.Fatalf("%s: the box was deleted although its export failed", c.name)
		}
		f.order(t, box, false)
		if e := p.deleteAudit(id); !strings.HasPrefix(e.Outcome, "blocked: ") {
			t.Errorf("%s: audit %+v, want blocked", c.name, e)
		}
		if len(p.verifiedExports(id)) != 0 {
			t.Errorf("%s: a failed export is listed as verified", c.name)
		}
	}

	// Nothing to archive: the export holds the trajectories, and the
	// delete goes on.
	id, box := mk("nothing-to-archive")
	f.box(box).archiveAt = "file"
	f.converse(t, box)
	p.deleteConfirmed(id)
	p.waitRemoved(id, 2*time.Minute)
	if !f.gone(box) {
		t.Fatal("nothing to archive: box not deleted")
	}
	if e := p.deleteAudit(id); !strings.Contains(e.Outcome, "nothing to archive") {
		t.Errorf("nothing to archive not recorded: %+v", e)
	}
	if ex := p.verifiedExports(id); len(ex) != 1 || ex[0].ArchiveSHA256 != nil {
		t.Errorf("nothing to archive: exports %+v", ex)
	}

	// 429 then 503, each with Retry-After, then the real answer.
	id, box = mk("retried")
	f.box(box).faults = []archiveFault{{status: 429, retryAfter: "1", count: 1}, {status: 503, retryAfter: "1", count: 1}}
	p.deleteConfirmed(id)
	p.waitRemoved(id, 2*time.Minute)
	f.order(t, box, true)
	statuses := ""
	for _, l := range f.requests() {
		if strings.Contains(l, "8000-"+box+".") && strings.Contains(l, "/api/file/archive") {
			statuses += l[strings.LastIndex(l, " ")+1:] + " "
		}
	}
	// Then the archives of what lies beside the seeded repository (the
	// agent-server narrowed the first to it) and the git delta, all 200.
	if rest, ok := strings.CutPrefix(statuses, "429 503 200 "); !ok || strings.ReplaceAll(rest, "200 ", "") != "" {
		t.Errorf("archive answers %q, want 429 503 200 and then 200s only", statuses)
	}

	// Best effort: an explicit account setting, audited; the preview says
	// so; a refused key no longer blocks.
	code, raw := p.call("PATCH", "/v1/accounts/"+acct, map[string]string{"delete_export": "sometimes"}, nil)
	if code != 400 || !strings.Contains(string(raw), "best_effort") {
		t.Errorf("PATCH with a bad mode: %d %s", code, raw)
	}
	p.must(404, "PATCH", "/v1/accounts/acc_nope", map[string]string{"delete_export": "best_effort"}, nil)
	var patched struct {
		Account struct {
			DeleteExport string `json:"delete_export"`
		}
	}
	p.must(200, "PATCH", "/v1/accounts/"+acct, map[string]string{"delete_export": "best_effort"}, &patched)
	if patched.Account.DeleteExport != "best_effort" {
		t.Fatalf("account after PATCH: %+v", patched)
	}
	id, box = mk("best-effort")
	f.box(box).key = "not-the-key"
	pv := p.deleteConfirmed(id)
	if pv.Export.Mode != "best_effort" || !strings.Contains(strings.Join(pv.Lost, "\n"), "best_effort") {
		t.Errorf("best-effort preview: %+v", pv)
	}
	p.waitRemoved(id, 2*time.Minute)
	if !f.gone(box) {
		t.Fatal("best-effort: box not deleted")
	}
	if e := p.deleteAudit(id); !strings.Contains(e.Outcome, "without a verified export") {
		t.Errorf("best-effort delete audit: %+v", e)
	}
	var page struct{ Entries []auditEntry }
	p.must(200, "GET", "/v1/audit?limit=500", nil, &page)
	changed := false
	for _, e := range page.Entries {
		changed = changed || (e.Action == "account_change" && strings.Contains(e.Outcome, "best_effort"))
	}
	if !changed {
		t.Error("the account change is not audited")
	}
}

// TestDeleteCrashAtEveryStep: for every step of the pipeline, companion
// kills itself (SIGKILL, the test-only crash point) right after journaling
// that step, and is started again: each delete finishes, every box was
// deleted only after its archive was read and a verified export is
// listed, and a box still existed at every crash before the provider
// delete was called.
func TestDeleteCrashAtEveryStep(t *testing.T) {
	f := newFarm(t)
	steps := []string{"lock", "recheck", "wake", "export", "verify", "provider_delete", "mark_deleted"}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			dataDir := t.TempDir()
			p := start(t, options{dataDir: dataDir, env: []string{"COMPANION_TEST_CRASH_AT=delete:" + step}})
			acct := f.account(p)
			var created struct{ Workspace workspace }
			p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "crash-" + step}, &created)
			id := created.Workspace.ID
			box := p.waitState(id, "running", time.Minute).BoxID
			f.converse(t, box)
			p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
			p.waitState(id, "paused", time.Minute)
			previewAndDeleteCrashing(p, id)
			select {
			case <-p.done:
			case <-time.After(2 * time.Minute):
				t.Fatalf("companion did not crash at step %s\n%s", step, p.stderr.String())
			}
			if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("companion ended with %v, want SIGKILL at the crash point", p.exit)
			}
			if step != "mark_deleted" && f.gone(box) {
				t.Fatalf("crash at %s: the box was already deleted", step)
			}
			if step == "mark_deleted" {
				f.order(t, box, true)
			}

			p = start(t, options{dataDir: dataDir})
			p.waitRemoved(id, 2*time.Minute)
			if !f.gone(box) {
				t.Fatalf("after the restart the box still exists")
			}
			f.order(t, box, true)
			if len(p.verifiedExports(id)) == 0 {
				t.Fatalf("deleted without a verified export listed")
			}
			e := p.deleteAudit(id)
			if !strings.HasPrefix(e.Outcome, "ok") || e.ExportSHA256 == nil {
				t.Errorf("delete audit after the crash at %s: %+v", step, e)
			}
		})
	}
}

var _ = fmt.Sprint
var _ = testsupport.Poll
