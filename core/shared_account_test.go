package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/canvasapp/companion/core"
)

// TestSharedAccount: every user sees and uses a shared account, only its
// owner removes it, and a box found on it is adopted for the user its
// owner label names (the admin when it names nobody).
func TestSharedAccount(t *testing.T) {
	e := newClockEnv(t)
	emu, acct := sharedCloudAccount(t, e)
	ctx := context.Background()
	for _, who := range []string{"u_admin", "u_bob"} {
		list, err := e.svc.Accounts(ctx, who)
		if err != nil || len(list) != 1 || !list[0].Shared {
			t.Fatalf("%s's accounts: %+v %v", who, list, err)
		}
	}
	if err := e.svc.RemoveAccount(ctx, "u_bob", "shared"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("bob removes the shared account: %v, want not found", err)
	}
	emu.addOwnedBox(acct.ID, "box-bob", "u_bob")
	emu.addBox(acct.ID, "box-nobody")
	if err := e.svc.ReconcileAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	owners := boxOwners(e.svc, "u_admin", "u_bob", "")
	if owners["box-bob"] != "u_bob" || owners["box-nobody"] != "u_admin" {
		t.Fatalf("adopted owners: %v, want box-bob to bob and box-nobody to the admin", owners)
	}
}

// TestAdoptionSkipsRemovedUsers: with sign-in (OwnersExist set), a box on
// a shared account whose owner label names a removed user is adopted for
// the account's owner, not for nobody; a label naming a user who exists
// still wins; and a lookup that fails adopts nothing this pass.
func TestAdoptionSkipsRemovedUsers(t *testing.T) {
	fail := false
	e := newClockEnvOwners(t, func(ctx context.Context, owners []string) (map[string]bool, error) {
		if fail {
			return nil, errors.New("the users table is locked")
		}
		return users("u_admin", "u_bob")(ctx, owners)
	})
	emu, acct := sharedCloudAccount(t, e)
	ctx := context.Background()
	fail = true
	emu.addOwnedBox(acct.ID, "box-bob", "u_bob")
	if err := e.svc.ReconcileAccount(ctx, acct); err == nil || !strings.Contains(err.Error(), "the users table is locked") {
		t.Fatalf("a pass whose owner lookup fails: %v, want its error", err)
	}
	if n := len(e.svc.Workspaces("u_bob")) + len(e.svc.Workspaces("u_admin")); n != 0 {
		t.Fatalf("%d boxes adopted without knowing their owner", n)
	}
	fail = false
	emu.addOwnedBox(acct.ID, "box-gone", "u_gone")
	if err := e.svc.ReconcileAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	if owners := boxOwners(e.svc, "u_admin", "u_bob", "u_gone"); owners["box-bob"] != "u_bob" || owners["box-gone"] != "u_admin" {
		t.Fatalf("adopted owners: %v, want box-bob to bob and box-gone (a removed user's) to the admin", owners)
	}
}

// boxOwners maps the box of each workspace of the owners given to its owner.
func boxOwners(svc *core.Service, owners ...string) map[string]string {
	out := map[string]string{}
	for _, who := range owners {
		for _, ws := range svc.Workspaces(who) {
			out[ws.BoxID] = who
		}
	}
	return out
}

// sharedCloudAccount registers an emulated provider "cloud" and the admin's
// shared account on it.
func sharedCloudAccount(t *testing.T, e *clockEnv) (*emuProvider, core.Account) {
	t.Helper()
	emu := newEmu("cloud")
	e.reg.Register("cloud", emu)
	acct := core.Account{ID: "shared", Owner: "u_admin", Provider: "cloud", Label: "Local", Shared: true}
	if _, err := e.svc.EnsureAccount(context.Background(), acct); err != nil {
		t.Fatal(err)
	}
	return emu, acct
}
