package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// exportsPreview is the export part of a retention preview.
type exportsPreview struct {
	Exports struct {
		Due []struct {
			ID   string `json:"id"`
			Kept string `json:"kept"`
		} `json:"due"`
		Removed      int   `json:"removed"`
		RemovedBytes int64 `json:"removed_bytes"`
	} `json:"exports"`
}

// TestExportRetentionServe: serve with exports in a real S3 server and an
// account policy that keeps exports one second. The dry run lists the old
// exports, says which it keeps and why, and removes nothing. Once the
// policy is set, the tick removes an old export's objects from the bucket
// (audited; its download then says why it is gone), keeps the newest
// export of a workspace that still exists, and never touches the export a
// delete held at the provider relies on; once that delete is through, its
// export goes too.
func TestExportRetentionServe(t *testing.T) {
	st := s3Store(t)
	image, scope := boxImage(t), dockerScope(t)
	gate := newHoldGate(t)
	p := start(t, options{mode: "serve", dataDir: t.TempDir(), env: append(s3Env(), "DOCKER_HOST=unix://"+gate.path),
		args: []string{"--listen", "127.0.0.1:0", "--docker-image", image, "--docker-scope", scope, "--export-store", st.url,
			"--retention-interval", "200ms", "--reconcile-interval", "1h"}})
	ws := p.createRunning("deleted", "alive")
	exportNow := func(id string) exportRec {
		var started struct{ Export exportRec }
		p.must(202, "POST", "/v1/workspaces/"+id+"/export", nil, &started)
		rec := p.waitExport(started.Export.ID, 2*time.Minute)
		if !rec.Verified {
			t.Fatalf("export of %s: %+v", id, rec)
		}
		return rec
	}
	own := exportNow(ws["deleted"].ID)
	older := exportNow(ws["alive"].ID)
	newest := exportNow(ws["alive"].ID)

	// A delete held at the engine, after its export verified.
	gate.arm(`/containers/` + ws["deleted"].BoxID + `$`)
	p.deleteConfirmed(ws["deleted"].ID)
	select {
	case <-gate.reached:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the delete never reached the engine\n%s", p.stderr.String())
	}
	var list struct{ Exports []exportRec }
	p.must(200, "GET", "/v1/workspaces/"+ws["deleted"].ID+"/exports", nil, &list)
	var relied exportRec
	for _, e := range list.Exports {
		if e.Verified && e.ID != own.ID {
			relied = e
		}
	}
	if relied.ID == "" {
		t.Fatalf("no verified export of the pending delete: %+v", list.Exports)
	}
	time.Sleep(1100 * time.Millisecond) // every export is now older than the policy's second

	var pv exportsPreview
	p.must(200, "POST", "/v1/accounts/local-docker/retention/preview", map[string]any{"enabled": false, "exports_kept_for_seconds": 1}, &pv)
	kept := map[string]string{}
	for _, d := range pv.Exports.Due {
		kept[d.ID] = d.Kept
	}
	// The workspace being deleted still exists: its newest export stays
	// until it is gone.
	if len(kept) != 4 || kept[older.ID] != "" || !strings.Contains(kept[own.ID], "newest export") ||
		!strings.Contains(kept[newest.ID], "newest export") || !strings.Contains(kept[relied.ID], "pending delete") {
		t.Fatalf("preview lists %v; want the live workspace's old export removed, the newest of each existing workspace and the pending delete's kept", kept)
	}
	if pv.Exports.Removed != 1 || pv.Exports.RemovedBytes != older.Bytes {
		t.Fatalf("preview removes %d exports, %d bytes; want 1, %d", pv.Exports.Removed, pv.Exports.RemovedBytes, older.Bytes)
	}
	for _, e := range []exportRec{own, older, newest, relied} {
		exportDirIn(t, st, e.WorkspaceID, e.ID) // still committed after the dry run
	}

	p.must(200, "PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": false, "exports_kept_for_seconds": 1}, nil)
	p.waitExportState(older.ID, "expired", time.Minute)
	if keys := exportKeys(st, older.ID); len(keys) != 0 {
		t.Errorf("the expired export's objects are still in the bucket: %v", keys)
	}
	var file exportFile
	for _, f := range older.Files {
		if f.URL != "" {
			file = f
		}
	}
	resp, body := p.get(file.URL, nil)
	if resp.StatusCode != 409 || !strings.Contains(string(body), "export retention") {
		t.Errorf("download of an expired export: %d %s; want 409 naming export retention", resp.StatusCode, body)
	}
	// The held delete still relies on its export, and its workspace keeps
	// its newest; so does the live one.
	time.Sleep(time.Second) // several ticks
	for _, e := range []exportRec{relied, own, newest} {
		if got := p.exportState(e.ID); got != "verified" {
			t.Fatalf("export %s is %s while the delete is held; want verified", e.ID, got)
		}
		exportDirIn(t, st, e.WorkspaceID, e.ID)
	}

	close(gate.release)
	p.waitRemoved(ws["deleted"].ID, 2*time.Minute)
	p.waitExportState(relied.ID, "expired", time.Minute)
	p.waitExportState(own.ID, "expired", time.Minute)
	for _, e := range []exportRec{relied, own} {
		if keys := exportKeys(st, e.ID); len(keys) != 0 {
			t.Errorf("export %s expired, its objects remain: %v", e.ID, keys)
		}
	}
	if got := p.exportState(newest.ID); got != "verified" {
		t.Errorf("the live workspace's newest export is %s; want verified", got)
	}
	expired := 0
	for _, a := range p.retentionAudit() {
		if a.Action == "export_expire" {
			expired++
		}
	}
	if expired != 3 {
		t.Errorf("%d export_expire audit entries, want 3", expired)
	}
}

// exportKeys lists the bucket's keys of an export.
func exportKeys(st objectStore, exportID string) []string {
	var out []string
	for _, k := range st.keys("companion/") {
		if strings.Contains(k, "-"+exportID+"/") {
			out = append(out, k)
		}
	}
	return out
}

func (p *proc) exportState(id string) string {
	p.t.Helper()
	var got struct{ Export exportRec }
	p.must(200, "GET", "/v1/exports/"+id, nil, &got)
	return got.Export.State
}

func (p *proc) waitExportState(id, want string, timeout time.Duration) {
	p.t.Helper()
	testsupport.Poll(p.t, timeout, func() error {
		if got := p.exportState(id); got != want {
			return fmt.Errorf("export %s is %s, want %s", id, got, want)
		}
		return nil
	})
}
