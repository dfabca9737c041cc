package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// TestRecoverStartsABoxLeftStopped: a crash after the provider made the box
// but before it was started leaves a journaled create and a stopped box.
// Recovery must start it, not record the workspace as paused.
func TestRecoverStartsABoxLeftStopped(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now().UTC()
	ws := core.Workspace{ID: core.NewID("ws"), Name: "half made", AccountID: e.acct.ID, Provider: "docker", State: core.StateCreating, CreatedAt: now}
	if _, err := e.store.PutOp(ctx, core.Op{WorkspaceID: ws.ID, Kind: core.OpCreate, Step: "provider_create", Attempts: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Feed().Save(ctx, ws); err != nil {
		t.Fatal(err)
	}
	box, err := e.prov.Create(ctx, e.acct, core.CreateSpec{WorkspaceID: ws.ID, Name: ws.Name})
	if err != nil {
		t.Fatal(err)
	}
	if box, err = e.prov.Suspend(ctx, e.acct, box.ID); err != nil || box.State != core.StatePaused {
		t.Fatalf("could not leave the box stopped: %+v %v", box, err)
	}

	if err := e.svc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	got := e.waitState(ws.ID, core.StateRunning)
	if got.BoxID != box.ID || got.Error != "" {
		t.Fatalf("recovered create: %+v, want box %s running", got, box.ID)
	}
	if b, err := e.prov.Get(ctx, e.acct, box.ID); err != nil || b.State != core.StateRunning {
		t.Fatalf("the box was not started: %+v %v", b, err)
	}
	if ops, _ := e.store.PendingOps(ctx); len(ops) != 0 {
		t.Fatalf("journal not empty after recovery: %+v", ops)
	}
}

// TestBoxlessWorkspaceDeletedWithoutItsProvider: a workspace with no box
// is removed at once even when its provider is not installed at all, and
// its preview does not speak of a box.
func TestBoxlessWorkspaceDeletedWithoutItsProvider(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ghost := core.Account{ID: "acc_ghost", Provider: "uninstalled"}
	if _, err := e.svc.EnsureAccount(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	ws := core.Workspace{ID: core.NewID("ws"), Name: "never made", AccountID: ghost.ID, Provider: "uninstalled",
		State: core.StateError, Error: "create failed: the provider refused", CreatedAt: time.Now().UTC()}
	if _, err := e.svc.Feed().Save(ctx, ws); err != nil {
		t.Fatal(err)
	}
	preview, err := e.svc.PreviewDelete(ctx, "", ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	lost := strings.Join(preview.Lost, " ")
	if !strings.Contains(lost, "no box") || !strings.Contains(lost, "the provider refused") || strings.Contains(lost, "the box ") {
		t.Fatalf("preview of a workspace with no box: %q", lost)
	}
	got, err := e.svc.Delete(ctx, "", ws.ID, preview.Token)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Removed || got.State != core.StateDeleted {
		t.Fatalf("delete answered %+v, want removed at once", got)
	}
	if _, err := e.svc.Workspace("", ws.ID); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("workspace still listed: %v", err)
	}
	// The token was used up.
	if _, err := e.svc.Delete(ctx, "", ws.ID, preview.Token); err == nil {
		t.Fatal("a second delete with the same token was accepted")
	}
}
