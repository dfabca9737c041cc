package db_test

import (
	"context"
	"database/sql"
	"reflect"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/canvasapp/companion/core"
)

func TestExportRecordsRoundTripAndOwner(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	run := core.ExportRecord{ID: "exp_a", WorkspaceID: "ws_1", Owner: "alice", CreatedAt: t0, UpdatedAt: t0, State: core.ExportRunning}
	if err := s.PutExport(ctx, run); err != nil {
		t.Fatal(err)
	}
	done := run
	done.UpdatedAt, done.State, done.Verified, done.Dir = t0.Add(time.Minute), core.ExportVerified, true, "/x/ws_1/stamp"
	done.Files = []core.ExportFile{{Name: "workspace.tar.gz", Kind: "archive", Format: "tar.gz", Bytes: 42, SHA256: "ab"}}
	done.Bytes, done.ArchiveSHA256 = 42, "ab"
	if err := s.PutExport(ctx, done); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetExport(ctx, "exp_a")
	if err != nil || !reflect.DeepEqual(got, done) {
		t.Fatalf("GetExport = %+v, %v; want %+v", got, err, done)
	}
	other := core.ExportRecord{ID: "exp_b", WorkspaceID: "ws_1", Owner: "bob", CreatedAt: t0.Add(time.Hour), UpdatedAt: t0.Add(time.Hour), State: core.ExportRunning}
	if err := s.PutExport(ctx, other); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListExports(ctx, "ws_1")
	if err != nil || len(list) != 2 || list[0].ID != "exp_b" || list[0].Owner != "bob" || list[1].Owner != "alice" {
		t.Fatalf("ListExports = %+v, %v; want newest first with their owners", list, err)
	}
	_, err = s.GetExport(ctx, "exp_none")
	wantKind(t, err, core.KindNotFound)

	// Reopened, the records are there.
	s.Close()
	s = openAt(t, path)
	if got, err := s.GetExport(ctx, "exp_a"); err != nil || !got.Verified {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
}

func TestExportRecordRefusesVerifiedWithoutFiles(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	t0 := time.Now()
	base := core.ExportRecord{ID: "exp_a", WorkspaceID: "ws_1", CreatedAt: t0, UpdatedAt: t0}
	for name, e := range map[string]core.ExportRecord{
		"verified without files": func() core.ExportRecord {
			e := base
			e.State, e.Verified, e.Dir = core.ExportVerified, true, "/d"
			return e
		}(),
		"verified flag on failed": func() core.ExportRecord {
			e := base
			e.State, e.Verified, e.Dir = core.ExportFailed, true, "/d"
			e.Files = []core.ExportFile{{Name: "f"}}
			return e
		}(),
		"unknown state": func() core.ExportRecord { e := base; e.State = "done"; return e }(),
	} {
		err := s.PutExport(ctx, e)
		wantKind(t, err, core.KindInvalid)
		if _, gerr := s.GetExport(ctx, "exp_a"); gerr == nil {
			t.Errorf("%s: stored", name)
		}
	}
}

// TestFailedExportNeverVerified: a crash leaves running records, which
// recovery fails (core.RecoverExports); the schema itself refuses a
// verified flag on a row that is not verified.
func TestFailedExportNeverVerified(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	run := core.ExportRecord{ID: "exp_run", WorkspaceID: "ws_1", CreatedAt: t0, UpdatedAt: t0, State: core.ExportRunning}
	if err := s.PutExport(ctx, run); err != nil {
		t.Fatal(err)
	}
	run.State, run.Error, run.UpdatedAt = core.ExportFailed, "interrupted", t0.Add(time.Hour)
	if err := s.PutExport(ctx, run); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetExport(ctx, run.ID); err != nil || got.State != core.ExportFailed || got.Error != "interrupted" || got.Verified {
		t.Fatalf("%s = %+v, %v; want failed", run.ID, got, err)
	}
	s.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE exports SET verified = 1 WHERE id = 'exp_run'`); err == nil {
		t.Error("the schema let a failed export be marked verified")
	}
}
