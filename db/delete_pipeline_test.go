package db_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// TestDeleteJournalSurvivesReopen: the delete pipeline's journal (what the
// delete saw, its export and whether it was verified) is read back after a
// reopen exactly as written, step by step.
func TestDeleteJournalSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	j := &core.DeleteJournal{State: core.StatePaused, BoxID: "box1", LastActivityAt: at, Actor: "desktop token", Mode: core.DeleteExportRequired}
	op, err := s.PutOp(ctx, core.Op{WorkspaceID: "ws_a", Kind: core.OpDelete, Step: "requested", CreatedAt: at, UpdatedAt: at, Delete: j})
	if err != nil {
		t.Fatal(err)
	}
	j.Woke, j.ExportID, j.Verified, j.ExportSHA256 = true, "exp_1", true, strings.Repeat("ab", 32)
	op.Step = core.StepProviderDelete
	if op, err = s.PutOp(ctx, op); err != nil {
		t.Fatal(err)
	}
	plain, err := s.PutOp(ctx, core.Op{WorkspaceID: "ws_b", Kind: core.OpPause, Step: "requested", CreatedAt: at, UpdatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openAt(t, path)
	defer s.Close()
	ops, err := s.PendingOps(ctx)
	if err != nil || len(ops) != 2 {
		t.Fatalf("PendingOps = %+v, %v", ops, err)
	}
	if !reflect.DeepEqual(ops[0], op) {
		t.Fatalf("delete entry after reopen =\n%+v\n%+v\nwant\n%+v\n%+v", ops[0], ops[0].Delete, op, op.Delete)
	}
	if ops[1].Delete != nil || ops[1].ID != plain.ID {
		t.Fatalf("a pause entry has a delete journal: %+v", ops[1])
	}
}

// TestAccountDeleteExportMode: best_effort is stored and read back; the
// default (and an explicit required) reads back as the zero value.
func TestAccountDeleteExportMode(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	defer s.Close()
	a := core.Account{ID: "acc_1", Provider: "docker", Label: "l", CreatedAt: time.Now()}
	if err := s.PutAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetAccount(ctx, a.ID)
	if err != nil || got.DeleteExport != "" || got.DeleteExport.Effective() != core.DeleteExportRequired {
		t.Fatalf("default mode = %q, %v", got.DeleteExport, err)
	}
	a.DeleteExport = core.DeleteExportBestEffort
	if err := s.PutAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.GetAccount(ctx, a.ID); got.DeleteExport != core.DeleteExportBestEffort {
		t.Fatalf("mode after setting best_effort = %q", got.DeleteExport)
	}
	a.DeleteExport = "sometimes"
	if err := s.PutAccount(ctx, a); err != nil {
		t.Fatal(err) // an unknown mode is written as required, never as itself
	}
	if got, _ = s.GetAccount(ctx, a.ID); got.DeleteExport != "" {
		t.Fatalf("an unknown mode read back as %q, want required", got.DeleteExport)
	}
}
