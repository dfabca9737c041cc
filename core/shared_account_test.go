package core_test

import (
	"context"
	"testing"

	"github.com/canvasapp/companion/core"
)

// TestSharedAccount: every user sees and uses a shared account, only its
// owner removes it, and a box found on it is adopted for the user its
// owner label names (the admin when it names nobody).
func TestSharedAccount(t *testing.T) {
	e := newClockEnv(t)
	emu := newEmu("cloud")
	e.reg.Register("cloud", emu)
	ctx := context.Background()
	acct := core.Account{ID: "shared", Owner: "u_admin", Provider: "cloud", Label: "Local", Shared: true}
	if _, err := e.svc.EnsureAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"u_admin", "u_bob"} {
		list, err := e.svc.Accounts(ctx, who)
		if err != nil || len(list) != 1 || !list[0].Shared {
			t.Fatalf("%s's accounts: %+v %v", who, list, err)
		}
	}
	if err := e.svc.RemoveAccount(ctx, "u_bob", "shared"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("bob removes the shared account: %v, want not found", err)
	}
	emu.addBox(acct.ID, "box-bob")
	emu.mu.Lock()
	b := emu.boxes[acct.ID]["box-bob"]
	b.Labels = map[string]string{core.LabelOwner: "u_bob"}
	emu.boxes[acct.ID]["box-bob"] = b
	emu.mu.Unlock()
	emu.addBox(acct.ID, "box-nobody")
	if err := e.svc.ReconcileAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, who := range []string{"u_admin", "u_bob", ""} {
		for _, ws := range e.svc.Workspaces(who) {
			owners[ws.BoxID] = who
		}
	}
	if owners["box-bob"] != "u_bob" || owners["box-nobody"] != "u_admin" {
		t.Fatalf("adopted owners: %v, want box-bob to bob and box-nobody to the admin", owners)
	}
}
