package core_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/exportrun"
	"github.com/canvasapp/companion/exports"
	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
)

// expiryEnv is a service on a real SQLite file with a real export dir, a
// fake clock and one account of retProvider.
type expiryEnv struct {
	*retEnv
	writer *exports.Writer
}

func newExpiryEnv(t *testing.T, serve bool) *expiryEnv {
	t.Helper()
	ctx := context.Background()
	st, err := db.Open(ctx, filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := &exports.Writer{Root: t.TempDir()}
	e := &retEnv{t: t, store: st, clock: fakeclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)),
		prov: &retProvider{boxes: map[string]core.Box{}}, ctx: ctx}
	reg := &core.Registry{}
	reg.Register("ret", e.prov)
	e.svc = newTestService(t, ctx, core.Config{Store: st, Retention: st, Providers: reg, Clock: e.clock, MaxAttempts: 1,
		ScheduledDeletion: serve, Exporter: &exportrun.Exporter{Writer: w},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if _, err := e.svc.EnsureAccount(ctx, core.Account{ID: retAccount, Provider: "ret", Label: "ret"}); err != nil {
		t.Fatal(err)
	}
	return &expiryEnv{retEnv: e, writer: w}
}

// export commits a real export of workspace wsID made `ago` before now,
// and records it verified.
func (e *expiryEnv) export(id, wsID string, ago time.Duration) core.ExportRecord {
	e.t.Helper()
	x, err := e.writer.BeginRecord(wsID, "box_"+wsID, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := x.Add(exports.File{Name: "trajectory-c1.zip", Kind: "trajectory", ConversationID: "c1"}, strings.NewReader("the work of "+id)); err != nil {
		e.t.Fatal(err)
	}
	m, dir, err := x.Commit()
	if err != nil {
		e.t.Fatal(err)
	}
	at := e.clock.Now().Add(-ago)
	rec := core.ExportRecord{ID: id, WorkspaceID: wsID, Owner: "", AccountID: retAccount, Provider: "ret", WorkspaceName: wsID,
		CreatedAt: at, UpdatedAt: at, State: core.ExportVerified, Verified: true, Dir: dir}
	for _, f := range m.Files {
		rec.Files = append(rec.Files, core.ExportFile{Name: f.Name, Kind: f.Kind, Bytes: f.Bytes, SHA256: f.SHA256})
		rec.Bytes += f.Bytes
	}
	if err := e.store.PutExport(e.ctx, rec); err != nil {
		e.t.Fatal(err)
	}
	return rec
}

func (e *expiryEnv) record(id string) core.ExportRecord {
	e.t.Helper()
	rec, err := e.store.GetExport(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// saveWS saves a workspace of the account in state st whose newest
// export is last.
func (e *expiryEnv) saveWS(id string, st core.State, last core.ExportRecord) {
	e.t.Helper()
	ws := core.Workspace{ID: id, Name: id, AccountID: retAccount, Provider: "ret", State: st, BoxID: "box_" + id,
		CreatedAt: e.clock.Now().Add(-30 * 24 * time.Hour), LastExportID: last.ID, LastExportAt: last.UpdatedAt}
	if st == core.StatePaused {
		ws.PausedAt = e.clock.Now().Add(-time.Hour)
	}
	if _, err := e.svc.Feed().Save(e.ctx, ws); err != nil {
		e.t.Fatal(err)
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// TestExportRetentionKeepsWhatIsReliedOn: a policy keeping exports a week
// previews the old exports it removes and those it keeps with the reason,
// removes nothing while previewing, then a tick removes the files of
// exactly the previewed ones (each audited), never the newest export of a
// live workspace nor one a pending delete relies on, and that one goes
// once the delete no longer pends. An expired export refuses downloads
// and restores with a message that says why.
func TestExportRetentionKeepsWhatIsReliedOn(t *testing.T) {
	e := newExpiryEnv(t, true)
	week := 7 * 24 * time.Hour
	older := e.export("exp_live_old", "ws_live", 10*24*time.Hour)
	newest := e.export("exp_live_new", "ws_live", 9*24*time.Hour)
	e.saveWS("ws_live", core.StatePaused, newest)
	gone := e.export("exp_gone_old", "ws_gone", 10*24*time.Hour)
	young := e.export("exp_gone_young", "ws_gone", time.Hour)
	e.saveWS("ws_gone", core.StateDeleted, young)
	pending := e.export("exp_pending", "ws_pending", 8*24*time.Hour)
	op, err := e.store.PutOp(e.ctx, core.Op{WorkspaceID: "ws_pending", Kind: core.OpDelete, Step: core.StepProviderDelete,
		CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now(), Delete: &core.DeleteJournal{ExportID: pending.ID, Verified: true}})
	if err != nil {
		t.Fatal(err)
	}

	pv, err := e.svc.PreviewRetention(e.ctx, "", core.RetentionPolicy{AccountID: retAccount, ExportsKeptFor: week})
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]string{}
	for _, it := range pv.Exports.Exports {
		kept[it.Export.ID] = it.Kept
	}
	want := map[string]string{older.ID: "", gone.ID: "", newest.ID: "it is the newest export of a workspace that still exists",
		pending.ID: "a pending delete of its workspace relies on it"}
	if len(kept) != len(want) {
		t.Fatalf("preview lists %v, want %v", kept, want)
	}
	for id, why := range want {
		if got, ok := kept[id]; !ok || got != why {
			t.Errorf("preview: export %s kept %q (listed %v), want %q", id, got, ok, why)
		}
	}
	if pv.Exports.Removed != 2 || pv.Exports.Bytes != older.Bytes+gone.Bytes {
		t.Errorf("preview removes %d exports, %d bytes; want 2, %d", pv.Exports.Removed, pv.Exports.Bytes, older.Bytes+gone.Bytes)
	}
	if !exists(older.Dir) || e.record(older.ID).State != core.ExportVerified {
		t.Fatal("the preview removed an export")
	}

	e.setPolicy(core.RetentionPolicy{ExportsKeptFor: week})
	rep := e.tick()
	if rep.ExportsExpired != 2 || rep.ExportsKept != 2 {
		t.Fatalf("tick expired %d and kept %d exports, want 2 and 2", rep.ExportsExpired, rep.ExportsKept)
	}
	for _, r := range []core.ExportRecord{older, gone} {
		if got := e.record(r.ID); got.State != core.ExportExpired || got.Verified {
			t.Errorf("export %s is %s after the tick, want expired", r.ID, got.State)
		}
		if exists(r.Dir) {
			t.Errorf("export %s: its directory %s is still there", r.ID, r.Dir)
		}
	}
	for _, r := range []core.ExportRecord{newest, young, pending} {
		if got := e.record(r.ID); got.State != core.ExportVerified || !exists(r.Dir) {
			t.Errorf("export %s is %s (dir there: %v), want verified and kept", r.ID, got.State, exists(r.Dir))
		}
		if _, err := exports.VerifyDir(r.Dir); err != nil {
			t.Errorf("kept export %s no longer verifies: %v", r.ID, err)
		}
	}
	audits := e.audit(core.AuditExportExpire)
	if len(audits) != 2 || audits[0].Actor != core.ActorRetention || !strings.Contains(audits[0].Outcome, "older than 7 days") {
		t.Fatalf("audit of export expiry = %+v, want two entries by retention", audits)
	}

	_, _, err = e.svc.OpenExportFile(e.ctx, "", older.ID, "trajectory-c1.zip")
	if !core.IsKind(err, core.KindConflict) || !strings.Contains(err.Error(), "export retention") {
		t.Errorf("download of an expired export: %v, want a conflict naming export retention", err)
	}
	_, err = e.svc.RestoreExport(e.ctx, "", gone.ID, core.RestoreRequest{})
	if !core.IsKind(err, core.KindConflict) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("restore of an expired export: %v, want a conflict saying it expired", err)
	}

	// The delete no longer pends: its export may go.
	if err := e.store.DeleteOp(e.ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	if rep := e.tick(); rep.ExportsExpired != 1 || e.record(pending.ID).State != core.ExportExpired || exists(pending.Dir) {
		t.Fatalf("after the delete ended: expired %d, export %s is %s", rep.ExportsExpired, pending.ID, e.record(pending.ID).State)
	}
}

// TestExportRetentionFinishesAnInterruptedRemoval: an export left
// expiring by a stop between marking it and removing its files (its
// manifest may be gone already) has its files removed by the next tick,
// whatever its age.
func TestExportRetentionFinishesAnInterruptedRemoval(t *testing.T) {
	e := newExpiryEnv(t, true)
	rec := e.export("exp_cut", "ws_cut", time.Hour)
	if err := os.Remove(filepath.Join(rec.Dir, exports.ManifestName)); err != nil {
		t.Fatal(err)
	}
	rec.State, rec.Verified, rec.Error = core.ExportExpiring, false, "removed by the account's export retention (exports are kept 30 days)"
	if err := e.store.PutExport(e.ctx, rec); err != nil {
		t.Fatal(err)
	}
	e.setPolicy(core.RetentionPolicy{ExportsKeptFor: 30 * 24 * time.Hour})
	if rep := e.tick(); rep.ExportsExpired != 1 {
		t.Fatalf("tick expired %d exports, want the interrupted one", rep.ExportsExpired)
	}
	if got := e.record(rec.ID); got.State != core.ExportExpired || exists(rec.Dir) {
		t.Fatalf("export is %s, directory there: %v; want expired and removed", got.State, exists(rec.Dir))
	}
}

// TestExportRetentionNotOnDesktop: the desktop stores the policy and
// previews it, and removes nothing.
func TestExportRetentionNotOnDesktop(t *testing.T) {
	e := newExpiryEnv(t, false)
	rec := e.export("exp_desk", "ws_desk", 100*24*time.Hour)
	e.setPolicy(core.RetentionPolicy{ExportsKeptFor: 24 * time.Hour})
	if rep := e.tick(); rep.ExportsExpired != 0 || e.record(rec.ID).State != core.ExportVerified || !exists(rec.Dir) {
		t.Fatalf("the desktop expired an export: %+v", rep)
	}
	pv, err := e.svc.PreviewRetention(e.ctx, "", core.RetentionPolicy{AccountID: retAccount, ExportsKeptFor: 24 * time.Hour})
	if err != nil || pv.ScheduledDeletion || pv.Exports.Removed != 1 {
		t.Fatalf("desktop preview = %+v, %v; want one export due and no scheduled deletion", pv.Exports, err)
	}
}

// TestExportRetentionPolicyValidation: a negative or absurd keep time is
// refused, naming the field.
func TestExportRetentionPolicyValidation(t *testing.T) {
	e := newExpiryEnv(t, true)
	for _, d := range []time.Duration{-time.Second, 20 * 365 * 24 * time.Hour} {
		_, err := e.svc.SetRetentionPolicy(e.ctx, "", core.RetentionPolicy{AccountID: retAccount, ExportsKeptFor: d})
		if !core.IsKind(err, core.KindInvalid) || !strings.Contains(err.Error(), "exports_kept_for_seconds") {
			t.Errorf("keep %v: %v, want invalid naming exports_kept_for_seconds", d, err)
		}
	}
	e.setPolicy(core.RetentionPolicy{ExportsKeptFor: 90 * 24 * time.Hour})
	p, err := e.svc.RetentionPolicyOf(e.ctx, "", retAccount)
	if err != nil || p.ExportsKeptFor != 90*24*time.Hour || p.Enabled {
		t.Fatalf("stored policy = %+v, %v; want exports kept 90 days, deletes off", p, err)
	}
}
