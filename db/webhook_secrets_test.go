package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db/storetest"
	"github.com/canvasapp/companion/webhooks"
)

func TestWebhookPreviousSecretSQLite(t *testing.T)     { testWebhookPreviousSecret(t, sqliteEngine) }
func TestWebhookPreviousSecretPostgreSQL(t *testing.T) { testWebhookPreviousSecret(t, pgEngine) }

// testWebhookPreviousSecret: a rotation's expiry is kept to the
// nanosecond, survives an update of the hook and a reopen, and is cleared
// only by the expiry it was read as, so a sender cannot clear a newer
// rotation's.
func testWebhookPreviousSecret(t *testing.T, e storetest.Engine) {
	ctx := context.Background()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	s, reopen := e.Open(t, func() time.Time { return now })
	h := webhooks.Hook{ID: "wh_1", Owner: "u", URL: "https://example.com/1", Events: []string{core.EventDeleteDone}, CreatedAt: now}
	if err := s.PutWebhook(ctx, h); err != nil {
		t.Fatal(err)
	}
	until := func(s storetest.Store) time.Time {
		t.Helper()
		got, err := s.Webhook(ctx, "wh_1")
		if err != nil {
			t.Fatal(err)
		}
		list, err := s.Webhooks(ctx, "u")
		if err != nil || len(list) != 1 || !list[0].PreviousSecretUntil.Equal(got.PreviousSecretUntil) {
			t.Fatalf("list %+v, %v: want the one hook as Webhook reads it", list, err)
		}
		return got.PreviousSecretUntil
	}
	if u := until(s); !u.IsZero() {
		t.Fatalf("a new hook has a previous secret until %v", u)
	}
	first := now.Add(24*time.Hour + 123456789)
	if err := s.SetPreviousSecret(ctx, "wh_1", first); err != nil {
		t.Fatal(err)
	}
	if u := until(s); !u.Equal(first) {
		t.Fatalf("previous secret until %v; want %v", u, first)
	}
	h.URL = "https://example.com/changed"
	if err := s.PutWebhook(ctx, h); err != nil {
		t.Fatal(err)
	}
	if u := until(reopen()); !u.Equal(first) {
		t.Fatalf("after an update and a reopen: %v; want %v", u, first)
	}
	// Another rotation since: the first one's expiry clears nothing.
	second := first.Add(time.Hour)
	if err := s.SetPreviousSecret(ctx, "wh_1", second); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.ExpirePreviousSecret(ctx, "wh_1", first); err != nil || ok {
		t.Fatalf("expire with a stale time: %v, %v; want nothing done", ok, err)
	}
	if u := until(s); !u.Equal(second) {
		t.Fatalf("after a stale expiry: %v; want %v", u, second)
	}
	if ok, err := s.ExpirePreviousSecret(ctx, "wh_1", second); err != nil || !ok {
		t.Fatalf("expire: %v, %v", ok, err)
	}
	if u := until(s); !u.IsZero() {
		t.Fatalf("after expiry: %v; want none", u)
	}
	if ok, err := s.ExpirePreviousSecret(ctx, "wh_1", second); err != nil || ok {
		t.Fatalf("expire twice: %v, %v", ok, err)
	}
	if err := s.SetPreviousSecret(ctx, "wh_1", second); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPreviousSecret(ctx, "wh_1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if u := until(s); !u.IsZero() {
		t.Fatalf("revoked: %v; want none", u)
	}
	if err := s.SetPreviousSecret(ctx, "wh_nobody", first); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("unknown hook: %v; want not found", err)
	}
}
