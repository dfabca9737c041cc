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

// TestWorkspaceLeaseRead: taking a lease with TryLeaseWorkspaceRead is
// TryLeaseWorkspace followed by GetWorkspace in one round trip: held or
// not as the lease says, the revision, and the row as the last save left
// it (removed ones included, a missing one not found); refused, it reads
// nothing and takes nothing.
func TestWorkspaceLeaseRead(t *testing.T) {
	ctx := context.Background()
	a, b := openPGPair(t)
	saved, err := a.SaveWorkspace(ctx, core.Workspace{ID: "ws_lr", Name: "first", Owner: "o", Provider: "docker", AccountID: "acc", State: core.StateRunning})
	if err != nil {
		t.Fatal(err)
	}
	saved.Name = "second"
	if saved, err = a.SaveWorkspace(ctx, saved); err != nil {
		t.Fatal(err)
	}
	r, err := b.TryLeaseWorkspaceRead(ctx, "ws_lr", "B", time.Hour)
	if err != nil || !r.Held || !r.Found || r.Rev != saved.Rev {
		t.Fatalf("lease and read after a save at rev %d: %+v, %v", saved.Rev, r, err)
	}
	if r.Workspace.Name != "second" || r.Workspace.Rev != saved.Rev || r.Workspace.Owner != "o" {
		t.Fatalf("read %+v, want the last save %+v", r.Workspace, saved)
	}
	// Held by B: A is refused and reads nothing; B renews and reads again.
	if r, err := a.TryLeaseWorkspaceRead(ctx, "ws_lr", "A", time.Hour); err != nil || r.Held || r.Found || r.Rev != 0 {
		t.Fatalf("a lease held elsewhere: %+v, %v; want nothing", r, err)
	}
	if r, err := b.TryLeaseWorkspaceRead(ctx, "ws_lr", "B", time.Hour); err != nil || !r.Held || r.Workspace.Name != "second" {
		t.Fatalf("the holder's renewal: %+v, %v", r, err)
	}
	if ok, _, err := a.TryLeaseWorkspace(ctx, "ws_lr", "A", time.Hour); err != nil || ok {
		t.Fatalf("A took the lease B renewed: %v, %v", ok, err)
	}
	if err := b.ReleaseWorkspaceLease(ctx, "ws_lr", "B"); err != nil {
		t.Fatal(err)
	}
	// A workspace with no row: the lease is held (a create takes it), the
	// row not found.
	if r, err := a.TryLeaseWorkspaceRead(ctx, "ws_none", "A", time.Hour); err != nil || !r.Held || r.Found {
		t.Fatalf("lease of a workspace with no row: %+v, %v", r, err)
	}
	// A removed one is read as it is stored: removed.
	saved.Removed = true
	if _, err := a.SaveWorkspace(ctx, saved); err != nil {
		t.Fatal(err)
	}
	if r, err := a.TryLeaseWorkspaceRead(ctx, "ws_lr", "A", time.Hour); err != nil || !r.Held || !r.Found || !r.Workspace.Removed {
		t.Fatalf("lease of a removed workspace: %+v, %v", r, err)
	}
}

// TestSaveWorkspaceReleasing: the save that ends an action releases its
// lease in the same statement: after it the workspace is saved (with the
// next revision) and another holder takes the lease at once. A save that
// fails releases nothing, and a holder's save never frees another
// holder's lease.
func TestSaveWorkspaceReleasing(t *testing.T) {
	ctx := context.Background()
	a, b := openPGPair(t)
	ws, err := a.SaveWorkspace(ctx, core.Workspace{ID: "ws_sr", Name: "n", Owner: "o", Provider: "docker", AccountID: "acc", State: core.StateRunning})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := a.TryLeaseWorkspace(ctx, "ws_sr", "A", time.Hour); err != nil || !ok {
		t.Fatalf("lease: %v, %v", ok, err)
	}
	// A save the database refuses (PostgreSQL's text holds no NUL) leaves
	// the lease held.
	bad := ws
	bad.Name = "bad\x00name"
	if _, err := a.SaveWorkspaceReleasing(ctx, bad, "A"); err == nil {
		t.Fatal("a name with a NUL byte was saved")
	}
	if ok, _, err := b.TryLeaseWorkspace(ctx, "ws_sr", "B", time.Hour); err != nil || ok {
		t.Fatalf("B took the lease after A's save failed: %v, %v", ok, err)
	}
	// B's save does not release A's lease.
	ws.Name = "by B"
	if _, err := b.SaveWorkspaceReleasing(ctx, ws, "B"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := b.TryLeaseWorkspace(ctx, "ws_sr", "B", time.Hour); err != nil || ok {
		t.Fatalf("B's save freed A's lease: %v, %v", ok, err)
	}
	ws.Name, ws.Progress = "by A", "exporting: 3 of 7 files"
	heardByB := listenTo(t, b)
	saved, err := a.SaveWorkspaceReleasing(ctx, ws, "A")
	if err != nil {
		t.Fatal(err)
	}
	// Its notification is SaveWorkspace's: the revision, with the
	// progress line relayed just before it.
	got := heardByB.wait(t, 2)
	if p, r := got[0], got[1]; p.Kind != core.RelayProgress || p.Rev != saved.Rev || p.WorkspaceID != "ws_sr" || p.Progress != ws.Progress ||
		r.Kind != "rev" || r.Rev != saved.Rev {
		t.Fatalf("B heard %+v after the releasing save at rev %d; want its progress line, then its revision", got, saved.Rev)
	}
	stored, err := b.GetWorkspace(ctx, "ws_sr")
	if err != nil || stored.Name != "by A" || stored.Rev != saved.Rev || saved.Rev <= ws.Rev {
		t.Fatalf("after the releasing save at rev %d: %+v, %v", saved.Rev, stored, err)
	}
	if ok, _, err := b.TryLeaseWorkspace(ctx, "ws_sr", "B", time.Hour); err != nil || !ok {
		t.Fatalf("the lease was not released with the save: %v, %v", ok, err)
	}
}
