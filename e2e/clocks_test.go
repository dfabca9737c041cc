package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// Providers' own deletion clocks (issue 22): Daytona's auto-delete, which
// companion sets from paused_ttl, and DigitalOcean's inactivity policy,
// which it cannot stop. Each emulator runs its clock on a wall clock the
// test moves past the deletion.

// clockState is the deletion part of a workspace on the wire.
type clockState struct {
	State        string     `json:"state"`
	BoxID        string     `json:"box_id"`
	Error        string     `json:"error"`
	PausedAt     *time.Time `json:"paused_at"`
	LastExportAt *time.Time `json:"last_export_at"`
	LastExportID string     `json:"last_export_id"`
	Deletion     struct {
		Clock    string     `json:"clock"`
		DueAt    *time.Time `json:"due_at"`
		AtRisk   bool       `json:"at_risk"`
		ExportBy *time.Time `json:"export_by"`
	} `json:"deletion"`
}

func (p *proc) clockState(id string) clockState {
	p.t.Helper()
	var out struct{ Workspace clockState }
	p.must(200, "GET", "/v1/workspaces/"+id, nil, &out)
	return out.Workspace
}

// waitClock polls the workspace until ok holds.
func (p *proc) waitClock(id, what string, timeout time.Duration, ok func(clockState) bool) clockState {
	p.t.Helper()
	var cur clockState
	testsupport.Poll(p.t, timeout, func() error {
		cur = p.clockState(id)
		if !ok(cur) {
			return fmt.Errorf("workspace %s not %s yet: %+v", id, what, cur)
		}
		return nil
	})
	return cur
}

// outside calls the provider's API on the farm directly, as someone (or
// the provider) would without companion.
func (f *cloudFarm) outside(t *testing.T, method, path string) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+cloudToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s at the emulator: %d", method, path, resp.StatusCode)
	}
}

// workFile writes a file of work into the box's /workspace.
func (f *cloudFarm) workFile(t *testing.T, box, name, body string) {
	t.Helper()
	dir := filepath.Join(f.diskOf(box), "workspace")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// restoredHas restores export id into account and checks that the new
// box holds name with body.
func (f *cloudFarm) restoredHas(p *proc, exportID, account, name, body string) {
	p.t.Helper()
	ws, pv := p.restoreInto(exportRec{ID: exportID}, account, "files")
	if pv.Method != "files" {
		p.t.Errorf("restore preview: %+v", pv)
	}
	got, err := os.ReadFile(filepath.Join(f.diskOf(ws.BoxID), "workspace", name))
	if err != nil || string(got) != body {
		p.t.Errorf("the restored box has %s as %q (%v), want %q", name, got, err, body)
	}
}

// forgetAgent makes the box's next proxied request start a new
// agent-server process (with the box's setup as it is now); the old one
// runs on unreached until the test ends.
func (f *cloudFarm) forgetAgent(box string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.procs, box)
}

// auditHas reports whether an entry by actor ("": anyone) of action has
// an outcome containing outcome.
func auditHas(entries []auditEntry, actor, action, outcome string) bool {
	for _, e := range entries {
		if (actor == "" || e.Actor == actor) && e.Action == action && strings.Contains(e.Outcome, outcome) {
			return true
		}
	}
	return false
}

// TestDaytonaAutoDeleteIsExportedFirst: in serve, a Daytona workspace
// with paused_ttl (Daytona's auto-delete) that Daytona stops on its own is
// at risk; the guard wakes it, exports it and stops it again, before the
// auto-delete. The clock is then moved past the deletion: the workspace
// shows deleted by the provider with that export, which restores the
// work into a new box. On the desktop the same paused_ttl is refused with
// the reason.
func TestDaytonaAutoDeleteIsExportedFirst(t *testing.T) {
	f := newCloudFarm(t, "daytona")
	d := start(t, options{dataDir: t.TempDir()})
	dacct := f.account(d)
	code, raw := d.call("POST", "/v1/workspaces", map[string]any{"account_id": dacct, "name": "desktop ttl",
		"lifecycle": map[string]any{"paused_ttl_seconds": 86400}}, nil)
	if code != 400 || !strings.Contains(string(raw), "auto_delete") || !strings.Contains(string(raw), "companion serve") {
		t.Errorf("desktop create with paused_ttl at Daytona: %d %s, want 400 naming the clock and serve", code, raw)
	}
	d.stop()

	p := start(t, options{mode: "serve", dataDir: t.TempDir(), args: []string{"--guard-interval", "300ms"}})
	acct := f.account(p)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "auto-deleted",
		"lifecycle": map[string]any{"paused_ttl_seconds": 60}}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", time.Minute).BoxID
	if sb, _ := f.dt.Sandbox(box); sb.AutoDeleteInterval != 1 {
		t.Fatalf("autoDeleteInterval %d, want 1 (minute)", sb.AutoDeleteInterval)
	}
	f.workFile(t, box, "work.txt", "work nobody exported\n")

	// Daytona stops it on its own: no export holds it, and its
	// auto-delete runs from now. The guard exports it at once (the clock
	// is shorter than the margin) and stops it again.
	f.outside(t, "POST", "/api/sandbox/"+box+"/stop")
	ws := p.waitClock(id, "exported by the guard", time.Minute, func(c clockState) bool {
		return c.LastExportID != "" && c.State == "paused" && !c.Deletion.AtRisk
	})
	if ws.Deletion.Clock != "auto_delete" || ws.Deletion.DueAt == nil || ws.PausedAt == nil ||
		!ws.Deletion.DueAt.Equal(ws.PausedAt.Add(time.Minute)) {
		t.Errorf("deletion after the guard: %+v, want auto_delete a minute after the pause", ws)
	}
	if sb, _ := f.dt.Sandbox(box); sb.State != "stopped" {
		t.Errorf("the sandbox after the guard is %s, want stopped again", sb.State)
	}
	audit := p.auditOf(id)
	if !auditHas(audit, "guard", "export", "ok") || !auditHas(audit, "guard", "pause", "paused again") {
		t.Errorf("the guard's export and pause are not audited: %+v", audit)
	}

	// Past the deletion: Daytona deletes the stopped box.
	f.dt.Clock().Advance(3 * time.Minute)
	gone := p.waitClock(id, "deleted by the provider", time.Minute, func(c clockState) bool { return c.State == "deleted" })
	if !strings.Contains(gone.Error, ws.LastExportID) || !strings.Contains(gone.Error, "auto_delete") {
		t.Errorf("the vanished workspace's error %q does not name its clock and export %s", gone.Error, ws.LastExportID)
	}
	if !auditHas(p.auditOf(id), "provider:daytona", "vanished", ws.LastExportID) {
		t.Errorf("the vanishing is not audited: %+v", p.auditOf(id))
	}
	var goneList struct{ Exports []exportRec }
	p.must(200, "GET", "/v1/exports?gone=true", nil, &goneList)
	if len(goneList.Exports) != 1 || goneList.Exports[0].ID != ws.LastExportID {
		t.Errorf("deleted workspaces' exports: %+v, want %s", goneList.Exports, ws.LastExportID)
	}
	f.restoredHas(p, ws.LastExportID, acct, "work.txt", "work nobody exported\n")
}

// TestPauseWhoseExportFailsKeepsTheBoxRunning: companion's own pause of a
// workspace with a deletion clock exports first; when that export fails
// (the box's agent-server refuses companion's key), the box keeps running
// and the workspace says why.
func TestPauseWhoseExportFailsKeepsTheBoxRunning(t *testing.T) {
	f := newCloudFarm(t, "daytona")
	p := start(t, options{mode: "serve", dataDir: t.TempDir()})
	acct := f.account(p)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "pause blocked",
		"lifecycle": map[string]any{"paused_ttl_seconds": 3600}}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", time.Minute).BoxID
	f.box(box).key = "not companion's key"

	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	ws := p.waitClock(id, "blocked", 2*time.Minute, func(c clockState) bool { return strings.HasPrefix(c.Error, "pause blocked") })
	if ws.State != "running" || !strings.Contains(ws.Error, "auto_delete") || ws.LastExportID != "" {
		t.Errorf("after the failed export: %+v, want running, the clock named, no export", ws)
	}
	if sb, _ := f.dt.Sandbox(box); sb.State != "started" {
		t.Errorf("the sandbox is %s, want started", sb.State)
	}
	if a := p.auditOf(id); !auditHas(a, "", "export", "failed") {
		t.Errorf("the failed export is not audited: %+v", a)
	}

	// With the key right again, the pause exports and then pauses.
	f.box(box).key = ""
	f.forgetAgent(box)
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	ws = p.waitClock(id, "paused after its export", 2*time.Minute, func(c clockState) bool { return c.State == "paused" })
	if ws.LastExportID == "" || ws.Deletion.AtRisk || ws.Error != "" {
		t.Errorf("paused: %+v, want an export, not at risk, no error", ws)
	}
}

// TestDigitalOceanInactivityDestroy: DigitalOcean pauses a session and
// may destroy it, at a time it does not publish. In serve the guard
// exports the paused session at once; moved past the inactivity policy,
// the session is destroyed and the export restores the work.
func TestDigitalOceanInactivityDestroy(t *testing.T) {
	f := newCloudFarm(t, "digitalocean")
	p := start(t, options{mode: "serve", dataDir: t.TempDir(), args: []string{"--guard-interval", "300ms"}})
	acct := f.account(p)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "inactive"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", time.Minute).BoxID
	f.workFile(t, box, "notes.txt", "session notes\n")

	f.outside(t, "POST", "/v2/agents/sessions/"+box+"/pause")
	ws := p.waitClock(id, "exported by the guard", time.Minute, func(c clockState) bool {
		return c.LastExportID != "" && c.State == "paused" && !c.Deletion.AtRisk
	})
	if ws.Deletion.Clock != "inactivity_destroy" || ws.Deletion.DueAt != nil {
		t.Errorf("deletion: %+v, want inactivity_destroy with no published time", ws.Deletion)
	}
	f.do.SetInactivityDestroy(time.Hour)
	f.do.Clock().Advance(2 * time.Hour)
	gone := p.waitClock(id, "deleted by the provider", time.Minute, func(c clockState) bool { return c.State == "deleted" })
	if !strings.Contains(gone.Error, ws.LastExportID) {
		t.Errorf("the destroyed session's error %q does not name export %s", gone.Error, ws.LastExportID)
	}
	f.do.SetInactivityDestroy(0)
	f.restoredHas(p, ws.LastExportID, acct, "notes.txt", "session notes\n")
}

// TestDesktopMarksAtRisk: the desktop exports nothing on its own. A
// session DigitalOcean paused is marked at risk on the stream (its clock,
// no published time, no guard); the person's export clears the mark; a
// session destroyed out of band then shows that export, and one destroyed
// with none says its files are lost.
func TestDesktopMarksAtRisk(t *testing.T) {
	f := newCloudFarm(t, "digitalocean")
	p := start(t, options{dataDir: t.TempDir()})
	acct := f.account(p)
	s := p.dial(0)
	ids := map[string]string{}
	for _, name := range []string{"kept", "lost"} {
		var created struct{ Workspace workspace }
		p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": name}, &created)
		ids[name] = created.Workspace.ID
		box := p.waitState(created.Workspace.ID, "running", time.Minute).BoxID
		f.workFile(t, box, "a.txt", name+"\n")
		f.outside(t, "POST", "/v2/agents/sessions/"+box+"/pause")
	}
	atRisk := map[string]bool{}
	s.waitFor("both at risk on the stream", time.Minute, func(m wsMsg) bool {
		if m.Type == "upsert" && m.Workspace != nil && strings.Contains(string(m.Raw), `"at_risk":true`) &&
			strings.Contains(string(m.Raw), `"clock":"inactivity_destroy"`) {
			atRisk[m.Workspace.ID] = true
		}
		return atRisk[ids["kept"]] && atRisk[ids["lost"]]
	})
	for _, id := range ids {
		if c := p.clockState(id); c.Deletion.ExportBy != nil || c.Deletion.DueAt != nil {
			t.Errorf("desktop at-risk workspace: %+v, want no export_by (no guard) and no due time (unpublished)", c.Deletion)
		}
	}
	time.Sleep(time.Second) // no guard runs here: still at risk
	if c := p.clockState(ids["kept"]); !c.Deletion.AtRisk || c.LastExportID != "" {
		t.Fatalf("the desktop exported on its own: %+v", c)
	}

	var started struct{ Export exportRec }
	p.must(202, "POST", "/v1/workspaces/"+ids["kept"]+"/export?wake=true", nil, &started)
	if e := p.waitExport(started.Export.ID, 2*time.Minute); !e.Verified {
		t.Fatalf("the person's export: %+v", e)
	}
	kept := p.waitClock(ids["kept"], "covered", time.Minute, func(c clockState) bool { return c.LastExportID == started.Export.ID })
	if kept.Deletion.AtRisk {
		t.Errorf("still at risk after its export: %+v", kept)
	}

	for name, id := range ids {
		f.outside(t, "DELETE", "/v2/agents/sessions/"+p.clockState(id).BoxID)
		gone := p.waitClock(id, "deleted by the provider", time.Minute, func(c clockState) bool { return c.State == "deleted" })
		switch name {
		case "kept":
			if !strings.Contains(gone.Error, started.Export.ID) {
				t.Errorf("kept: %q does not name its export", gone.Error)
			}
		case "lost":
			if !strings.Contains(gone.Error, "files are lost") {
				t.Errorf("lost: %q does not say the files are lost", gone.Error)
			}
		}
	}
}
