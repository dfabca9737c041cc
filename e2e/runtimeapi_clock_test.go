package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/e2e/emulators/runtimeapi"
)

// TestRuntimeAPIPausedReaperIsExportedFirst: the runtime-api deletes
// runtimes paused for about a day on its own (the module's paused_reaper
// clock). In serve, companion's pause exports the workspace first; the
// emulator's clock is then moved past the reaper, which stops the runtime
// and its disk is gone. The workspace shows deleted by the provider with
// that export, and the export restores the work into a new runtime.
func TestRuntimeAPIPausedReaperIsExportedFirst(t *testing.T) {
	dir := t.TempDir()
	agent := startAgentServer(t, dir)
	rp := httputil.NewSingleHostReverseProxy(agent)
	rt := runtimeapi.New(runtimeapi.Options{Token: cloudToken, Clock: emulator.NewWallClock(),
		PausedReapAfter: 24 * time.Hour, AgentServer: func(string) http.Handler { return rp }})
	srv := httptest.NewServer(rt.Handler())
	t.Cleanup(func() { rt.Close(); srv.Close() })
	rt.SetBaseURL(srv.URL)

	p := start(t, options{mode: "serve", dataDir: t.TempDir(), args: []string{"--docker-scope", "unused", "--guard-interval", "300ms"}})
	var acct struct {
		Account struct {
			ID string `json:"id"`
		} `json:"account"`
	}
	p.must(201, "POST", "/v1/accounts", map[string]any{"provider": "runtimeapi", "label": "openhands",
		"config":      map[string]string{"api_url": srv.URL, "image": "ghcr.io/openhands/agent-server:e2e", "runtime_hosts": "127.0.0.1"},
		"credentials": map[string]string{"token": cloudToken}}, &acct)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct.Account.ID, "name": "reaped"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", time.Minute).BoxID
	work := filepath.Join(dir, "workspace", "work.txt")
	if err := os.WriteFile(work, []byte("work only the export keeps\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", time.Minute)
	ws := p.clockState(id)
	if ws.LastExportID == "" || ws.Deletion.Clock != "paused_reaper" || ws.Deletion.DueAt == nil || ws.PausedAt == nil ||
		!ws.Deletion.DueAt.Equal(ws.PausedAt.Add(24*time.Hour)) {
		t.Fatalf("after the pause: %+v, want an export and paused_reaper a day after the pause", ws)
	}
	if !auditHas(p.auditOf(id), "", "export", "before a pause") {
		t.Errorf("the pause did not export first: %+v", p.auditOf(id))
	}

	// A day later the runtime-api stops the runtime; its disk is gone.
	rt.Clock().Advance(25 * time.Hour)
	if r, _ := rt.Session(box); r.Status != runtimeapi.StatusStopped {
		t.Fatalf("the runtime is %s past the reaper, want stopped", r.Status)
	}
	if err := os.Remove(work); err != nil {
		t.Fatal(err)
	}
	gone := p.waitClock(id, "deleted by the provider", 2*time.Minute, func(c clockState) bool { return c.State == "deleted" })
	if !strings.Contains(gone.Error, ws.LastExportID) || !strings.Contains(gone.Error, "paused_reaper") {
		t.Errorf("the vanished workspace's error %q does not name its clock and export %s", gone.Error, ws.LastExportID)
	}
	if !auditHas(p.auditOf(id), "provider:runtimeapi", "vanished", ws.LastExportID) {
		t.Errorf("the vanishing is not audited: %+v", p.auditOf(id))
	}

	// The export taken before brings the work back, in a new runtime.
	restored, pv := p.restoreInto(exportRec{ID: ws.LastExportID}, acct.Account.ID, "files")
	if pv.Method != "files" || restored.BoxID == box {
		t.Errorf("restore: preview %+v, box %s (the reaped one is %s)", pv, restored.BoxID, box)
	}
	if got, err := os.ReadFile(work); err != nil || string(got) != "work only the export keeps\n" {
		t.Errorf("after the restore work.txt is %q (%v)", got, err)
	}
}
