package core_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// users is the OwnersExist of a fixed set of users.
func users(ids ...string) core.OwnersExist {
	return func(_ context.Context, owners []string) (map[string]bool, error) {
		exist := map[string]bool{}
		for _, o := range owners {
			exist[o] = slices.Contains(ids, o)
		}
		return exist, nil
	}
}

// TestHandOverOrphans: what was made before sign-in (owner "") goes to the
// admin: the account, its workspaces (announced on the feed under the new
// owner) and their export records, each audited under the admin. Another
// user's account and workspace stay theirs, and a second hand-over finds
// nothing left.
func TestHandOverOrphans(t *testing.T) {
	exist := users("u_admin", "u_bob") // who exists, as a test step has it
	e := newClockEnvOwners(t, func(ctx context.Context, owners []string) (map[string]bool, error) {
		return exist(ctx, owners)
	})
	emu := newEmu("cloud")
	e.reg.Register("cloud", emu)
	ctx := context.Background()
	before := e.account("before", "cloud") // owner "": made before sign-in
	bobs := core.Account{ID: "bobs", Owner: "u_bob", Provider: "cloud", Label: "bob's"}
	if _, err := e.svc.EnsureAccount(ctx, bobs); err != nil {
		t.Fatal(err)
	}
	emu.addBox(before.ID, "box-1")
	emu.addBox(before.ID, "box-2")
	emu.addBox(bobs.ID, "box-bob")
	for _, a := range []core.Account{before, bobs} {
		if err := e.svc.ReconcileAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	unowned := e.svc.Workspaces("")
	if len(unowned) != 2 || len(e.svc.Workspaces("u_bob")) != 1 {
		t.Fatalf("adopted: %d unowned, %d of bob's; want 2 and 1", len(unowned), len(e.svc.Workspaces("u_bob")))
	}
	now := e.clock.Now()
	exp := core.ExportRecord{ID: "exp_before", WorkspaceID: unowned[0].ID, CreatedAt: now, UpdatedAt: now,
		State: core.ExportFailed, Error: "the box was gone"}
	if err := e.store.PutExport(ctx, exp); err != nil {
		t.Fatal(err)
	}
	_, _, sub := e.svc.Feed().SubscribeSnapshot(16)
	defer sub.Close()

	n, err := e.svc.HandOverOrphans(ctx, "u_admin")
	if err != nil {
		t.Fatal(err)
	}
	if n.Accounts != 1 || n.Workspaces != 2 || n.Exports != 1 || len(n.Busy) != 0 {
		t.Fatalf("handed over %+v; want 1 account, 2 workspaces, 1 export", n)
	}
	if got := e.svc.Workspaces(""); len(got) != 0 {
		t.Fatalf("%d workspaces still unowned", len(got))
	}
	if got := e.svc.Workspaces("u_admin"); len(got) != 2 {
		t.Fatalf("the admin has %d workspaces, want 2", len(got))
	}
	if got := e.svc.Workspaces("u_bob"); len(got) != 1 || got[0].BoxID != "box-bob" {
		t.Fatalf("bob's workspaces: %+v", got)
	}
	if a, err := e.svc.Account(ctx, "u_admin", before.ID); err != nil || a.Owner != "u_admin" {
		t.Fatalf("the account made before sign-in: %+v %v", a, err)
	}
	if a, err := e.store.GetAccount(ctx, bobs.ID); err != nil || a.Owner != "u_bob" {
		t.Fatalf("bob's account: %+v %v", a, err)
	}
	if got, err := e.svc.Export(ctx, "u_admin", exp.ID); err != nil || got.Owner != "u_admin" {
		t.Fatalf("the export record: %+v %v", got, err)
	}
	for range 2 {
		select {
		case ch := <-sub.C:
			if ch.Workspace.Owner != "u_admin" {
				t.Fatalf("the feed announced %s for %q, want u_admin", ch.Workspace.ID, ch.Workspace.Owner)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the feed announced fewer than two hand-overs")
		}
	}
	audit, err := e.svc.Audit(ctx, "u_admin", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	handed := map[string]bool{}
	for _, a := range audit {
		if a.Action == core.AuditHandOver && a.Actor == core.ActorHandOver {
			handed[a.AccountID+"/"+a.WorkspaceID] = true
		}
	}
	if len(handed) != 3 || !handed[before.ID+"/"] {
		t.Fatalf("hand-over audit entries of the admin: %v; want the account and both workspaces", handed)
	}

	if n, err := e.svc.HandOverOrphans(ctx, "u_admin"); err != nil || n.Accounts+n.Workspaces+n.Exports != 0 {
		t.Fatalf("second hand-over: %+v %v; want nothing left", n, err)
	}

	// Bob is removed: his account and workspace go to the admin too,
	// audited as such, and the admin's own things are not asked about.
	var asked [][]string
	exist = func(ctx context.Context, owners []string) (map[string]bool, error) {
		asked = append(asked, owners)
		return users("u_admin")(ctx, owners)
	}
	if n, err := e.svc.HandOverOrphans(ctx, "u_admin"); err != nil || n.Accounts != 1 || n.Workspaces != 1 {
		t.Fatalf("hand-over of removed bob's things: %+v %v; want 1 account and 1 workspace", n, err)
	}
	if len(asked) != 1 || !slices.Equal(asked[0], []string{"u_bob"}) {
		t.Fatalf("owners looked up: %v; want bob once (for his account and workspace together), never the admin", asked)
	}
	if got := e.svc.Workspaces("u_admin"); len(got) != 3 {
		t.Fatalf("the admin has %d workspaces after bob's removal, want 3", len(got))
	}
	audit, err = e.svc.Audit(ctx, "u_admin", 0, 1)
	if err != nil || len(audit) != 1 || audit[0].WorkspaceID == "" || audit[0].Outcome != "ok (its user was removed)" {
		t.Fatalf("the newest audit entry: %+v %v; want bob's workspace handed over as its user was removed", audit, err)
	}

	// An owner that cannot be looked up is an error, and nothing of its
	// is handed over.
	exist = func(context.Context, []string) (map[string]bool, error) {
		return nil, errors.New("the users table is locked")
	}
	if _, err := e.svc.HandOverOrphans(ctx, "u_carol"); err == nil || !strings.Contains(err.Error(), "the users table is locked") {
		t.Fatalf("hand-over with a failing lookup: %v", err)
	}
	if got := e.svc.Workspaces("u_carol"); len(got) != 0 {
		t.Fatalf("carol got %d workspaces from a failed lookup", len(got))
	}
	if _, err := e.svc.HandOverOrphans(ctx, ""); !core.IsKind(err, core.KindInvalid) {
		t.Fatalf("hand-over to nobody: %v, want invalid", err)
	}
}

// TestHandOverWithoutUsersTakesOnlyUnowned: a service not told which users
// exist (no Config.OwnersExist) hands over what is owned by "" and
// believes every other owner.
func TestHandOverWithoutUsersTakesOnlyUnowned(t *testing.T) {
	e := newClockEnv(t)
	e.reg.Register("cloud", newEmu("cloud"))
	ctx := context.Background()
	e.account("before", "cloud")
	if _, err := e.svc.EnsureAccount(ctx, core.Account{ID: "bobs", Owner: "u_bob", Provider: "cloud", Label: "bob's"}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.svc.HandOverOrphans(ctx, "u_admin"); err != nil || n.Accounts != 1 {
		t.Fatalf("hand-over: %+v %v; want the unowned account only", n, err)
	}
	if a, err := e.store.GetAccount(ctx, "bobs"); err != nil || a.Owner != "u_bob" {
		t.Fatalf("bob's account: %+v %v; want it still his", a, err)
	}
}
