package db_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db/storetest"
	"github.com/canvasapp/companion/webhooks"
)

func TestWebhookOutboxSQLite(t *testing.T)     { testWebhookOutbox(t, sqliteEngine) }
func TestWebhookOutboxPostgreSQL(t *testing.T) { testWebhookOutbox(t, pgEngine) }

// testWebhookOutbox: hooks are found by owner and account, an event is
// enqueued once per hook, a claim leases each delivery to one sender until
// its lease ends, a sender that lost its lease cannot record an outcome,
// and two stores (two replicas) claiming at once never take the same one.
func testWebhookOutbox(t *testing.T, e storetest.Engine) {
	ctx := context.Background()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	s, reopen := e.Open(t, func() time.Time { return now })
	hook := func(id, owner, account string) {
		t.Helper()
		if err := s.PutWebhook(ctx, webhooks.Hook{ID: id, Owner: owner, AccountID: account, URL: "https://example.com/" + id,
			Events: []string{core.EventDeleteDone, core.EventRetentionWarning}, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	hook("wh_u_all", "u", "")
	hook("wh_u_acc1", "u", "acc_1")
	hook("wh_v_acc1", "v", "acc_1")
	hook("wh_v_all", "v", "")
	ids := func(hs []webhooks.Hook, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hs {
			out = append(out, h.ID)
		}
		sort.Strings(out)
		return fmt.Sprint(out)
	}
	if got := ids(s.WebhooksFor(ctx, "u", "acc_1", false)); got != "[wh_u_acc1 wh_u_all]" {
		t.Errorf("u's event on acc_1 goes to %s", got)
	}
	if got := ids(s.WebhooksFor(ctx, "u", "acc_2", false)); got != "[wh_u_all]" {
		t.Errorf("u's event on acc_2 goes to %s", got)
	}
	if got := ids(s.WebhooksFor(ctx, "u", "acc_1", true)); got != "[wh_u_acc1 wh_u_all wh_v_acc1]" {
		t.Errorf("shared acc_1's event goes to %s", got)
	}
	if got := ids(s.Webhooks(ctx, "v")); got != "[wh_v_acc1 wh_v_all]" {
		t.Errorf("v's hooks: %s", got)
	}

	d := func(id, hook, event string) webhooks.Delivery {
		return webhooks.Delivery{ID: id, WebhookID: hook, EventID: event, Event: core.EventDeleteDone, Payload: []byte(`{"id":"` + event + `"}`),
			CreatedAt: now, State: webhooks.StatePending, NextAt: now}
	}
	n, err := s.Enqueue(ctx, []webhooks.Delivery{d("dlv_1", "wh_u_all", "evt_1"), d("dlv_2", "wh_u_acc1", "evt_1"), d("dlv_3", "wh_u_all", "evt_2")})
	if err != nil || n != 3 {
		t.Fatalf("Enqueue: %d, %v; want 3 new", n, err)
	}
	// The same event again (a step redone after a crash) adds nothing.
	if n, err := s.Enqueue(ctx, []webhooks.Delivery{d("dlv_9", "wh_u_all", "evt_1")}); err != nil || n != 0 {
		t.Fatalf("Enqueue again: %d, %v; want 0 new", n, err)
	}
	lease := time.Minute
	a, err := s.ClaimDeliveries(ctx, "A", now, lease, 2)
	if err != nil || len(a) != 2 || a[0].Holder != "A" || !a[0].LeaseUntil.Equal(now.Add(lease)) {
		t.Fatalf("A claimed %+v, %v; want 2 leased to A", a, err)
	}
	b, err := s.ClaimDeliveries(ctx, "B", now, lease, 10)
	if err != nil || len(b) != 1 || b[0].ID == a[0].ID || b[0].ID == a[1].ID {
		t.Fatalf("B claimed %+v, %v; want the one A does not hold", b, err)
	}
	if c, err := s.ClaimDeliveries(ctx, "C", now.Add(lease-time.Second), lease, 10); err != nil || len(c) != 0 {
		t.Fatalf("C claimed %d while every lease holds, %v", len(c), err)
	}
	// A finishes one; its other lease runs out (A died) and C takes it.
	done := a[0]
	done.State, done.Attempts, done.DeliveredAt, done.LastStatus = webhooks.StateDelivered, 1, now, 204
	if err := s.FinishDelivery(ctx, "A", done); err != nil {
		t.Fatal(err)
	}
	later := now.Add(lease + time.Second)
	c, err := s.ClaimDeliveries(ctx, "C", later, lease, 10)
	if err != nil || len(c) != 2 {
		t.Fatalf("C claimed %+v, %v after the leases ended; want A's unfinished one and B's", c, err)
	}
	stale := a[1]
	stale.State, stale.Attempts = webhooks.StateDelivered, 1
	if err := s.FinishDelivery(ctx, "A", stale); !core.IsKind(err, core.KindConflict) {
		t.Fatalf("A recorded an outcome of a delivery C holds: %v", err)
	}
	retry := c[0]
	retry.Attempts, retry.LastStatus, retry.LastError, retry.NextAt = 1, 503, "down", later.Add(time.Hour)
	if err := s.FinishDelivery(ctx, "C", retry); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseDeliveries(ctx, "C"); err != nil {
		t.Fatal(err)
	}
	// Released: due again at once, but retry waits for its backoff.
	if got, err := s.ClaimDeliveries(ctx, "D", later, lease, 10); err != nil || len(got) != 1 || got[0].ID != c[1].ID {
		t.Fatalf("D claimed %+v, %v; want only the released one", got, err)
	}
	pend, failed, err := s.OutboxDepth(ctx)
	if err != nil || pend != 2 || failed != 0 {
		t.Fatalf("depth %d pending, %d failed, %v; want 2, 0", pend, failed, err)
	}
	list, err := s.Deliveries(ctx, retry.WebhookID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, x := range list {
		if x.ID == retry.ID {
			found = x.Attempts == 1 && x.LastStatus == 503 && x.LastError == "down" && x.NextAt.Equal(later.Add(time.Hour)) && x.State == webhooks.StatePending
		}
	}
	if !found {
		t.Errorf("deliveries %+v do not show the retry as recorded", list)
	}
	// Pruning forgets old delivered and failed rows only.
	if n, err := s.PruneDeliveries(ctx, now.Add(time.Second), 10); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want the one delivered row", n, err)
	}
	if n, err := s.PruneDeliveries(ctx, now.Add(time.Second), 10); err != nil || n != 0 {
		t.Fatalf("pruned %d more, %v; pending rows must stay", n, err)
	}
	if err := s.DeleteWebhook(ctx, "wh_u_all"); err != nil {
		t.Fatal(err)
	}
	if list, err := s.Deliveries(ctx, "wh_u_all", 10); err != nil || len(list) != 0 {
		t.Fatalf("deleted hook's deliveries: %+v, %v", list, err)
	}
	if _, err := s.Webhook(ctx, "wh_u_all"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("deleted hook: %v", err)
	}

	// Two stores claiming at once, as two replicas: each delivery once.
	var many []webhooks.Delivery
	for i := range 60 {
		many = append(many, d(fmt.Sprintf("dlv_m%02d", i), "wh_v_all", fmt.Sprintf("evt_m%02d", i)))
	}
	if _, err := s.Enqueue(ctx, many); err != nil {
		t.Fatal(err)
	}
	other := reopen()
	var (
		mu  sync.Mutex
		got = map[string]string{}
		wg  sync.WaitGroup
	)
	for i, st := range []storetest.Store{s, other} {
		holder := fmt.Sprintf("R%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ds, err := st.ClaimDeliveries(ctx, holder, later, lease, 3)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ds) == 0 {
					return
				}
				mu.Lock()
				for _, x := range ds {
					if prev, ok := got[x.ID]; ok {
						t.Errorf("%s claimed by %s and %s", x.ID, prev, holder)
					}
					got[x.ID] = holder
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, x := range many {
		if got[x.ID] == "" {
			t.Errorf("%s never claimed", x.ID)
		}
	}
}
