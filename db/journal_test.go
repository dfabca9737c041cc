package db_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

func TestOpsJournal(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	at := time.Date(2025, 5, 6, 7, 8, 9, 10, time.UTC)

	a, err := s.PutOp(ctx, core.Op{WorkspaceID: "ws_a", Kind: core.OpCreate, Step: "requested", CreatedAt: at, UpdatedAt: at})
	if err != nil || a.ID == 0 {
		t.Fatalf("PutOp insert = %+v, %v", a, err)
	}
	b, err := s.PutOp(ctx, core.Op{WorkspaceID: "ws_b", Kind: core.OpDelete, Step: "requested", CreatedAt: at, UpdatedAt: at})
	if err != nil || b.ID <= a.ID {
		t.Fatalf("second PutOp = %+v, %v", b, err)
	}

	a.Step, a.Attempts, a.LastError, a.UpdatedAt = "provider_create", 3, "rate limited", at.Add(time.Minute)
	updated, err := s.PutOp(ctx, a)
	if err != nil || !reflect.DeepEqual(updated, a) {
		t.Fatalf("PutOp update = %+v, %v", updated, err)
	}

	s.Close()
	s = openAt(t, path)
	defer s.Close()
	ops, err := s.PendingOps(ctx)
	if err != nil || !reflect.DeepEqual(ops, []core.Op{a, b}) {
		t.Fatalf("PendingOps after reopen =\n%+v, %v\nwant\n%+v", ops, err, []core.Op{a, b})
	}

	if err := s.DeleteOp(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	wantKind(t, s.DeleteOp(ctx, a.ID), core.KindNotFound)
	_, err = s.PutOp(ctx, a) // updating a closed entry
	wantKind(t, err, core.KindNotFound)

	// Ids are never reused, even for the highest one.
	if err := s.DeleteOp(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	c, err := s.PutOp(ctx, core.Op{WorkspaceID: "ws_c", Kind: core.OpPause})
	if err != nil || c.ID <= b.ID {
		t.Fatalf("new op after deletes = %+v, %v; want id above %d", c, err, b.ID)
	}
	ops, _ = s.PendingOps(ctx)
	if len(ops) != 1 || ops[0].ID != c.ID || !ops[0].CreatedAt.IsZero() {
		t.Fatalf("PendingOps = %+v", ops)
	}

	_, err = s.PutOp(ctx, core.Op{Kind: core.OpPause})
	wantKind(t, err, core.KindInvalid)
}
