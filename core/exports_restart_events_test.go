package core_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/webhooks"
)

// TestEventsExportFailedAtRestart: exports a previous run left running
// are failed at start (RecoverExports), and the owner's webhook gets one
// export.failed for each, naming the export, its workspace and account,
// with the reason. One of them had its event stored by a recovery that
// crashed before failing the record: it is failed now and still sent once.
// A second recovery stores nothing more.
func TestEventsExportFailedAtRestart(t *testing.T) {
	e, hooks, hook := newEventsEnv(t)
	ctx := e.ctx
	w := e.paused("left", 30*time.Minute, 1)
	running := func(id string) core.ExportRecord {
		t.Helper()
		now := e.clock.Now()
		rec := core.ExportRecord{ID: id, WorkspaceID: w.ID, Owner: w.Owner, WorkspaceName: w.Name, Provider: w.Provider,
			AccountID: w.AccountID, CreatedAt: now, UpdatedAt: now, State: core.ExportRunning}
		if err := e.store.PutExport(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	left, half := running("exp_left"), running("exp_half")
	if err := hooks.Emit(ctx, core.Event{ID: core.EventID(core.EventExportFailed, half.ID), Kind: core.EventExportFailed,
		Owner: w.Owner, AccountID: w.AccountID, WorkspaceID: w.ID, ExportID: half.ID, Reason: "stored before a crash"}); err != nil {
		t.Fatal(err)
	}

	for range 2 {
		if err := e.svc.RecoverExports(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, rec := range []core.ExportRecord{left, half} {
		got, err := e.store.GetExport(ctx, rec.ID)
		if err != nil || got.State != core.ExportFailed || got.Verified || got.Error == "" {
			t.Fatalf("%s after recovery: %+v, %v; want failed with a reason", rec.ID, got, err)
		}
	}
	sent := outboxOf(t, hooks, hook)[core.EventExportFailed]
	var ids []string
	var payload webhooks.Payload
	for _, d := range sent {
		ids = append(ids, d.EventID)
		if d.EventID == core.EventID(core.EventExportFailed, left.ID) {
			if err := json.Unmarshal(d.Payload, &payload); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []string{core.EventID(core.EventExportFailed, left.ID), core.EventID(core.EventExportFailed, half.ID)}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("export.failed deliveries for events %v; want one for each interrupted export, %v", ids, want)
	}
	rec, _ := e.store.GetExport(ctx, left.ID)
	d := payload.Data
	if payload.Type != core.EventExportFailed || d.Export == nil || d.Export.ID != left.ID || d.WorkspaceID != w.ID ||
		d.WorkspaceName != w.Name || d.AccountID != w.AccountID || d.Provider != w.Provider || d.Reason != rec.Error {
		t.Fatalf("export.failed payload %+v (export %+v); want the export, its workspace and account, and the record's reason %q", payload, d.Export, rec.Error)
	}
}
