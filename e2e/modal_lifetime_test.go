package e2e

import (
	"testing"
	"time"

	modalemu "github.com/canvasapp/companion/e2e/emulators/modal"
)

// TestModalLifetimeIsGuarded: Modal ends every sandbox 24 h after it was
// made (its lifetime clock, which runs while the box runs). On the desktop
// a running Modal workspace shows that clock, due a day after its sandbox
// was made, at risk (nothing exports it on its own). In serve, whose guard
// margin here is longer than the lifetime, the guard pauses it at once:
// an export first, then the snapshot, audited as the guard's; the paused
// workspace is held by that export, and its sandbox is gone at Modal.
func TestModalLifetimeIsGuarded(t *testing.T) {
	f := newModalFarm(t)
	d := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	var created struct{ Workspace workspace }
	before := time.Now()
	d.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": f.account(d), "name": "desktop"}, &created)
	d.waitState(created.Workspace.ID, "running", time.Minute)
	ws := d.waitClock(created.Workspace.ID, "under its lifetime", 30*time.Second, func(c clockState) bool { return c.Deletion.Clock != "" })
	if ws.Deletion.Clock != "lifetime" || !ws.Deletion.AtRisk || ws.Deletion.DueAt == nil || ws.Deletion.ExportBy != nil ||
		ws.Deletion.DueAt.Before(before.Add(24*time.Hour-time.Minute)) || ws.Deletion.DueAt.After(time.Now().Add(24*time.Hour)) {
		t.Fatalf("a running Modal workspace on the desktop: %+v, want lifetime due a day after its create, at risk, no guard", ws)
	}
	d.stop()

	p := start(t, options{mode: "serve", dataDir: t.TempDir(), args: []string{"--docker-scope", "unused",
		"--guard-interval", "300ms", "--guard-margin", "25h"}})
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": f.account(p), "name": "guarded"}, &created)
	id := created.Workspace.ID
	paused := p.waitClock(id, "paused by the guard", 2*time.Minute, func(c clockState) bool { return c.State == "paused" })
	if paused.Deletion.Clock != "snapshot_expiry" || paused.Deletion.AtRisk || paused.LastExportID == "" {
		t.Errorf("after the guard's pause: %+v, want snapshot_expiry held by the export made first", paused)
	}
	audit := p.auditOf(id)
	if !auditHas(audit, "guard", "export", "before a pause") || !auditHas(audit, "guard", "pause", "ok") {
		t.Errorf("the guard's export and pause are not audited as its own: %+v", audit)
	}
	for _, sb := range f.emu.Sandboxes() {
		if sb.Tags["companion.workspace"] == id && sb.State == modalemu.StateRunning {
			t.Errorf("sandbox %s of the paused workspace still runs", sb.ID)
		}
	}
}
