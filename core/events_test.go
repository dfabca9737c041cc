package core_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
	"github.com/canvasapp/companion/secrets"
	"github.com/canvasapp/companion/webhooks"
)

// newEventsEnv is a retention env (serve) whose service's event sink is
// the webhooks service on the same SQLite file, with one webhook of the
// owner ("") for every event.
func newEventsEnv(t *testing.T) (*retEnv, *webhooks.Hooks, webhooks.Hook) {
	t.Helper()
	ctx := context.Background()
	st, err := db.Open(ctx, filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k, _ := secrets.ParseKey(secrets.GenerateKey())
	inst, _ := st.InstanceID(ctx)
	keys, err := secrets.OpenSealed(ctx, st, inst, k)
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	hooks, err := webhooks.New(webhooks.Config{Store: st, Secrets: keys, Now: clock.Now, AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	prov := &retProvider{boxes: map[string]core.Box{}}
	reg := &core.Registry{}
	reg.Register("ret", prov)
	svc := newTestService(t, ctx, core.Config{Store: st, Providers: reg, Clock: clock, MaxAttempts: 1, ScheduledDeletion: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Events: hooks})
	hooks.Attach(svc)
	if _, err := svc.EnsureAccount(ctx, core.Account{ID: retAccount, Provider: "ret", Label: "ret"}); err != nil {
		t.Fatal(err)
	}
	hook, _, err := hooks.Create(ctx, "", webhooks.CreateRequest{URL: "http://127.0.0.1:9/h", Events: core.EventKinds})
	if err != nil {
		t.Fatal(err)
	}
	return &retEnv{t: t, store: st, svc: svc, clock: clock, prov: prov, ctx: ctx}, hooks, hook
}

// outboxOf returns the hook's deliveries by event kind.
func outboxOf(t *testing.T, hooks *webhooks.Hooks, hook webhooks.Hook) map[string][]webhooks.Delivery {
	t.Helper()
	ds, err := hooks.Deliveries(context.Background(), "", hook.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]webhooks.Delivery{}
	for _, d := range ds {
		out[d.Event] = append(out[d.Event], d)
	}
	return out
}

// TestEventsReachTheOutbox: with the webhooks service as its event sink
// (on the same real SQLite file), a retention tick stores one
// retention.warning per workspace and delete_after, however many ticks
// see it, and the scheduled delete stores a delete.done, each as a
// pending delivery of the owner's webhook.
func TestEventsReachTheOutbox(t *testing.T) {
	e, hooks, hook := newEventsEnv(t)
	clock := e.clock
	w := e.paused("old", 30*time.Minute, 1)
	e.setPolicy(core.RetentionPolicy{Enabled: true, PausedFor: time.Hour, WarnBefore: 2 * time.Hour})
	events := func() map[string][]webhooks.Delivery { return outboxOf(t, hooks, hook) }
	for range 3 {
		e.tick()
	}
	warn := events()[core.EventRetentionWarning]
	if len(warn) != 1 || warn[0].EventID != core.EventID(core.EventRetentionWarning, w.ID, w.PausedAt.Add(time.Hour).UTC().Format(time.RFC3339Nano)) ||
		warn[0].State != webhooks.StatePending {
		t.Fatalf("warnings in the outbox: %+v; want one, pending, with the id of the workspace and its delete_after", warn)
	}
	clock.Advance(time.Hour)
	if rep := e.tick(); rep.Started != 1 {
		t.Fatalf("tick %+v; want the delete started", rep)
	}
	testsupport.Until(t, 10*time.Second, "the delete.done event", func() bool { return len(events()[core.EventDeleteDone]) == 1 })
	if _, ok := e.ws(w.ID); ok {
		t.Fatal("delete.done stored while the workspace is still there")
	}
	if got := events(); len(got[core.EventRetentionWarning]) != 1 || len(got[core.EventDeleteBlocked]) != 0 {
		t.Fatalf("outbox %+v", got)
	}
}

// TestEventsDeleteBlocked: a scheduled delete whose provider delete fails
// leaves the box and stores a delete.blocked with the reason, and no
// delete.done.
func TestEventsDeleteBlocked(t *testing.T) {
	e, hooks, hook := newEventsEnv(t)
	e.prov.deleteErr = core.Errorf(core.KindInvalid, "the provider refuses")
	w := e.paused("stuck", 2*time.Hour, 1)
	e.setPolicy(core.RetentionPolicy{Enabled: true, PausedFor: time.Hour, WarnBefore: time.Minute})
	if rep := e.tick(); rep.Started != 1 {
		t.Fatalf("tick %+v; want the delete started", rep)
	}
	testsupport.Until(t, 10*time.Second, "the delete.blocked event", func() bool { return len(outboxOf(t, hooks, hook)[core.EventDeleteBlocked]) == 1 })
	if _, ok := e.ws(w.ID); !ok {
		t.Fatal("the workspace is gone")
	}
	got := outboxOf(t, hooks, hook)
	if len(got[core.EventDeleteDone]) != 0 || len(got[core.EventRetentionWarning]) != 1 {
		t.Fatalf("outbox %+v", got)
	}
	if !strings.Contains(string(got[core.EventDeleteBlocked][0].Payload), "the provider refuses") {
		t.Fatalf("payload %s; want the reason", got[core.EventDeleteBlocked][0].Payload)
	}
}
