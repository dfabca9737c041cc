package core_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
)

// deafStore is a shared store whose replica takes leases but is never
// notified of the others' writes: it can only learn of them by reading.
type deafStore struct {
	core.Store
	core.WorkspaceLeases
}

// TestReplicaActsOnWhatThePreviousLeaseHolderWrote: replica B has not
// heard that A paused a workspace when it is asked to keep it. Taking
// the workspace's lease brings B's view up to date before the re-read
// under the lock, so B's save keeps A's pause instead of writing its
// stale "running" copy back over it.
func TestReplicaActsOnWhatThePreviousLeaseHolderWrote(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	service := func(st core.Store) *core.Service {
		svc := newTestService(t, ctx, core.Config{Store: st, Providers: &core.Registry{}, Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
		return svc
	}
	open := func() *db.PGStore { return openPG(t, url) }
	a := service(open())
	bs := open()
	b := service(deafStore{bs, bs})

	ws, err := a.Feed().Save(ctx, core.Workspace{ID: "ws_shared", Name: "shared", AccountID: "acc", Provider: "docker",
		State: core.StateRunning, BoxID: "box1", CreatedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Feed().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// A's pause action ends (A held the lease, and released it).
	ws.State, ws.PausedAt = core.StatePaused, time.Now().UTC()
	if _, err := a.Feed().Save(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Workspace("", ws.ID); got.State != core.StateRunning {
		t.Fatalf("B already shows %s; the test needs its copy stale", got.State)
	}

	kept, err := b.SetKeep(ctx, "", ws.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if kept.State != core.StatePaused || !kept.Keep {
		t.Fatalf("B saved %s, keep %v: it wrote over A's pause", kept.State, kept.Keep)
	}
	stored, err := bs.GetWorkspace(ctx, ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.State != core.StatePaused || !stored.Keep {
		t.Fatalf("stored: %s, keep %v; want paused and kept", stored.State, stored.Keep)
	}
}
