package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
)

// TestWorkspaceLeases: a lease is exclusive across stores on one database,
// renewable by its holder, released only by its holder, and taken over
// once it lapsed (a replica that died holding it).
func TestWorkspaceLeases(t *testing.T) {
	ctx := context.Background()
	a, b := openPGPair(t)
	try := func(s *db.PGStore, id, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, _, err := s.TryLeaseWorkspace(ctx, id, holder, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !try(a, "w1", "A", time.Hour) {
		t.Fatal("a free lease was refused")
	}
	if try(b, "w1", "B", time.Hour) {
		t.Fatal("B took a lease A holds")
	}
	if !try(b, "w2", "B", time.Hour) {
		t.Fatal("another workspace's lease was refused")
	}
	if !try(a, "w1", "A", time.Hour) {
		t.Fatal("A could not renew its own lease")
	}
	if err := b.ReleaseWorkspaceLease(ctx, "w1", "B"); err != nil {
		t.Fatal(err)
	}
	if try(b, "w1", "B", time.Hour) {
		t.Fatal("a release by B freed A's lease")
	}
	if err := a.ReleaseWorkspaceLease(ctx, "w1", "A"); err != nil {
		t.Fatal(err)
	}
	if !try(b, "w1", "B", 0) {
		t.Fatal("a released lease was refused")
	}
	// B's lease had no time left: as if B died, A takes it over.
	if !try(a, "w1", "A", time.Hour) {
		t.Fatal("a lapsed lease was not taken over")
	}
}

// TestWorkspaceLeaseTellsTheRevision: taking a lease reports the store's
// revision, so a replica whose feed is behind another's save catches up
// (and one that is not reads nothing more).
func TestWorkspaceLeaseTellsTheRevision(t *testing.T) {
	ctx := context.Background()
	a, b := openPGPair(t)
	saved, err := a.SaveWorkspace(ctx, core.Workspace{ID: "ws_rev", Name: "n", Provider: "docker", AccountID: "acc", State: core.StateRunning})
	if err != nil {
		t.Fatal(err)
	}
	ok, rev, err := b.TryLeaseWorkspace(ctx, "ws_rev", "B", time.Hour)
	if err != nil || !ok || rev != saved.Rev {
		t.Fatalf("lease after a save at rev %d: held %v, rev %d, %v", saved.Rev, ok, rev, err)
	}
	if err := b.ReleaseWorkspaceLease(ctx, "ws_rev", "B"); err != nil {
		t.Fatal(err)
	}
	again, err := a.SaveWorkspace(ctx, saved)
	if err != nil {
		t.Fatal(err)
	}
	if ok, rev, err := b.TryLeaseWorkspace(ctx, "ws_rev", "B", time.Hour); err != nil || !ok || rev != again.Rev {
		t.Fatalf("lease after a second save at rev %d: held %v, rev %d, %v", again.Rev, ok, rev, err)
	}
	if ok, rev, err := a.TryLeaseWorkspace(ctx, "ws_rev", "A", time.Hour); err != nil || ok || rev != 0 {
		t.Fatalf("a refused lease: held %v, rev %d, %v; want false, 0", ok, rev, err)
	}
}
