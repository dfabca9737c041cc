package db_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	_ "modernc.org/sqlite"
)

// auditTrail writes n entries for owner "" and closes the store, so the
// file can be tampered with as an attacker with file access would.
func auditTrail(t *testing.T, n int) string {
	t.Helper()
	s, path := openTemp(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range n {
		e, err := s.AppendAudit(context.Background(), core.AuditEntry{
			At: at.Add(time.Duration(i) * time.Second), Actor: core.ActorDesktopToken, Action: core.AuditPause,
			WorkspaceID: fmt.Sprintf("ws-%d", i), AccountID: "acct-1", Provider: "docker", Outcome: "ok",
		})
		if err != nil {
			t.Fatalf("AppendAudit %d: %v", i, err)
		}
		if e.ID != int64(i+1) {
			t.Fatalf("entry %d got id %d", i, e.ID)
		}
	}
	if got, err := s.VerifyAudit(context.Background()); err != nil || got != n {
		t.Fatalf("VerifyAudit of an untouched trail = %d, %v", got, err)
	}
	s.Close()
	return path
}

func tamper(t *testing.T, path string, stmts ...string) {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func verifyBreak(t *testing.T, path string) *db.AuditBreak {
	t.Helper()
	s := openAt(t, path)
	defer s.Close()
	_, err := s.VerifyAudit(context.Background())
	var brk *db.AuditBreak
	if !errors.As(err, &brk) {
		t.Fatalf("VerifyAudit after tampering = %v, want an *AuditBreak", err)
	}
	return brk
}

func TestAuditChainVerifies(t *testing.T) {
	path := auditTrail(t, 5)
	s := openAt(t, path)
	defer s.Close()
	n, err := s.VerifyAudit(context.Background())
	if err != nil || n != 5 {
		t.Fatalf("VerifyAudit = %d, %v; want 5, nil", n, err)
	}
	page, err := s.ListAudit(context.Background(), "", 0, 2)
	if err != nil || len(page) != 2 || page[0].ID != 5 || page[1].ID != 4 {
		t.Fatalf("first page = %+v, %v; want entries 5 and 4", page, err)
	}
	page, err = s.ListAudit(context.Background(), "", 4, 10)
	if err != nil || len(page) != 3 || page[0].ID != 3 || page[2].ID != 1 {
		t.Fatalf("page before 4 = %+v, %v; want entries 3, 2, 1", page, err)
	}
	if page[2].PrevHash != "" || page[1].PrevHash != page[2].Hash {
		t.Fatalf("chain links wrong: %+v", page)
	}
	other, err := s.ListAudit(context.Background(), "someone-else", 0, 10)
	if err != nil || len(other) != 0 {
		t.Fatalf("another owner's page = %+v, %v; want empty", other, err)
	}
}

func TestAuditChainDetectsEditedRow(t *testing.T) {
	path := auditTrail(t, 5)
	tamper(t, path, `UPDATE audit SET outcome = 'failed: nothing happened' WHERE id = 3`)
	brk := verifyBreak(t, path)
	if brk.ID != 3 || !strings.Contains(brk.Reason, "edited") {
		t.Fatalf("break = %v; want entry 3, edited", brk)
	}
}

func TestAuditChainDetectsEditedRowWithRecomputedHash(t *testing.T) {
	// Someone who edits a row and fixes its own hash still breaks the
	// next row's link.
	path := auditTrail(t, 5)
	tamper(t, path, `UPDATE audit SET hash = 'aa' || substr(hash, 3) WHERE id = 2`)
	brk := verifyBreak(t, path)
	if brk.ID != 2 {
		t.Fatalf("break = %v; want entry 2", brk)
	}
}

func TestAuditChainDetectsDeletedRow(t *testing.T) {
	path := auditTrail(t, 5)
	tamper(t, path, `DELETE FROM audit WHERE id = 2`)
	brk := verifyBreak(t, path)
	if brk.ID != 3 || !strings.Contains(brk.Reason, "entry 2 was removed") {
		t.Fatalf("break = %v; want entry 3 naming removed entry 2", brk)
	}
}

func TestAuditChainDetectsDeletedTail(t *testing.T) {
	path := auditTrail(t, 5)
	tamper(t, path, `DELETE FROM audit WHERE id = 5`)
	brk := verifyBreak(t, path)
	if brk.ID != 5 || !strings.Contains(brk.Reason, "removed from its end") {
		t.Fatalf("break = %v; want entry 5 missing from the end", brk)
	}
}

func TestAuditChainDetectsReorderedRows(t *testing.T) {
	path := auditTrail(t, 5)
	// Swap rows 2 and 4 whole, ids included, as one would to reorder.
	tamper(t, path,
		`UPDATE audit SET id = -2 WHERE id = 2`,
		`UPDATE audit SET id = 2 WHERE id = 4`,
		`UPDATE audit SET id = 4 WHERE id = -2`)
	brk := verifyBreak(t, path)
	if brk.ID != 2 {
		t.Fatalf("break = %v; want entry 2", brk)
	}
}

func TestAuditEntryNeedsActorAndAction(t *testing.T) {
	s, _ := openTemp(t)
	_, err := s.AppendAudit(context.Background(), core.AuditEntry{At: time.Now(), Action: "pause"})
	wantKind(t, err, core.KindInvalid)
}

func TestWorkspaceStopReasonRoundTrips(t *testing.T) {
	s, _ := openTemp(t)
	code := 137
	ws := save(t, s, core.Workspace{ID: "ws-1", Name: "a", AccountID: "a", Provider: "docker",
		State: core.StateStopped, StopReason: core.StopCrashed, ExitCode: &code})
	got, err := s.GetWorkspace(context.Background(), ws.ID)
	if err != nil || got.StopReason != core.StopCrashed || got.ExitCode == nil || *got.ExitCode != 137 {
		t.Fatalf("GetWorkspace = %+v, %v; want crashed, exit 137", got, err)
	}
	got.State, got.StopReason, got.ExitCode = core.StateRunning, core.StopNone, nil
	save(t, s, got)
	got, _ = s.GetWorkspace(context.Background(), ws.ID)
	if got.StopReason != "" || got.ExitCode != nil {
		t.Fatalf("after running again: reason %q, exit %v; want both cleared", got.StopReason, got.ExitCode)
	}
}
