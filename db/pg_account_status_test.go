package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// TestSharedAccountStatus: a status one replica records is what another
// reads, replaced by the next; none is kept for an account that is gone.
func TestSharedAccountStatus(t *testing.T) {
	ctx := context.Background()
	a, b := openPGPair(t)
	acct := core.Account{ID: "acc-1", Provider: "remu", Label: "one", CreatedAt: time.Now().UTC()}
	if err := a.PutAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.AccountStatusShared(ctx, acct.ID); ok || err != nil {
		t.Fatalf("status before any pass: %v %v, want none", ok, err)
	}
	okAt := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if err := a.PutAccountStatus(ctx, acct.ID, core.AccountStatus{State: core.AccountOK, LastOKAt: okAt}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.AccountStatusShared(ctx, acct.ID)
	if !ok || err != nil || got.State != core.AccountOK || !got.LastOKAt.Equal(okAt) || !got.NextAttemptAt.IsZero() {
		t.Fatalf("B reads %+v %v %v", got, ok, err)
	}
	next := okAt.Add(time.Minute)
	failing := core.AccountStatus{State: core.AccountFailing, Kind: core.KindUnavailable, Message: "down", LastOKAt: okAt, NextAttemptAt: next}
	if err := a.PutAccountStatus(ctx, acct.ID, failing); err != nil {
		t.Fatal(err)
	}
	if got, _, _ = b.AccountStatusShared(ctx, acct.ID); got != failing {
		t.Fatalf("B reads %+v, want %+v", got, failing)
	}
	// The account's flag comes with its status, as stored now.
	flag := core.AccountFlag{Code: "invented_boxes", Message: "many unknown boxes", Since: okAt}
	if err := a.SetAccountFlag(ctx, acct.ID, &flag); err != nil {
		t.Fatal(err)
	}
	if got, _, _ = b.AccountStatusShared(ctx, acct.ID); got.Flag == nil || *got.Flag != flag || got.State != failing.State {
		t.Fatalf("B reads %+v (flag %+v), want the status with flag %+v", got, got.Flag, flag)
	}
	if err := a.SetAccountFlag(ctx, acct.ID, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, _ = b.AccountStatusShared(ctx, acct.ID); got != failing {
		t.Fatalf("B reads %+v once the flag is cleared, want %+v", got, failing)
	}
	if err := b.DeleteAccount(ctx, acct.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.AccountStatusShared(ctx, acct.ID); ok || err != nil {
		t.Fatalf("status of a removed account: %v %v, want none", ok, err)
	}
	// A pass that ends after the removal records nothing.
	if err := a.PutAccountStatus(ctx, acct.ID, failing); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.AccountStatusShared(ctx, acct.ID); ok || err != nil {
		t.Fatalf("status recorded for a removed account: %v %v", ok, err)
	}
}
