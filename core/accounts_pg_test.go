package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
)

// passLog counts a reconciler's passes by account.
type passLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (p *passLog) after(id string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.n[id]++
	}
}

func (p *passLog) of(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[id]
}

// TestReconcilerFollowsAccountsChangedElsewhere: on one PostgreSQL
// database, an account added through replica A is listed by replica B's
// running reconciler (A's does not run), and B's status for it becomes
// ok; once A removes it, B stops listing it, without being told in
// process either time.
func TestReconcilerFollowsAccountsChangedElsewhere(t *testing.T) {
	rp := newReplicaPair(t, time.Second, nil)
	a, b := rp.svcs[0], rp.svcs[1]
	passes := &passLog{n: map[string]int{}}
	runReconciler(t, b, core.ReconcileConfig{Interval: 100 * time.Millisecond, AfterPass: passes.after})
	testsupport.Until(t, 30*time.Second, "B's first pass over the account it started with", func() bool {
		return passes.of(rp.acct.ID) >= 1
	})

	added, err := a.AddAccount(context.Background(), "", core.AddAccountRequest{Provider: "remu", Label: "added on A"})
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Until(t, 30*time.Second, "B lists the account added through A", func() bool {
		return passes.of(added.ID) >= 2 && b.AccountStatusOf(added.ID).State == core.AccountOK
	})
	if n := rp.emu.count(func() int { return rp.emu.lists["A"] }); n != 0 {
		t.Fatalf("A listed %d times; its reconciler does not run", n)
	}

	if err := a.RemoveAccount(context.Background(), "", added.ID); err != nil {
		t.Fatal(err)
	}
	// A pass that started before the removal may still end; three passes
	// over the other account later (three intervals) B has read the list
	// again, and from then on the removed account is never listed.
	base := passes.of(rp.acct.ID)
	testsupport.Until(t, 30*time.Second, "three more passes of B", func() bool { return passes.of(rp.acct.ID) >= base+3 })
	seen := passes.of(added.ID)
	base = passes.of(rp.acct.ID)
	testsupport.Until(t, 30*time.Second, "three more passes of B", func() bool { return passes.of(rp.acct.ID) >= base+3 })
	if n := passes.of(added.ID); n != seen {
		t.Fatalf("B listed the account A removed %d more times", n-seen)
	}
}

// TestRemoveAccountRespectsAnotherReplicasLease: removing an account
// forgets its workspaces, so it must not run while another replica acts
// on one of them: while that replica holds the workspace's lease the
// removal is refused and changes nothing; once released, it goes through.
func TestRemoveAccountRespectsAnotherReplicasLease(t *testing.T) {
	ctx := context.Background()
	rp := newReplicaPair(t, time.Second, nil)
	a, otherStore := rp.svcs[0], rp.stores[1]
	ws, err := a.Feed().Save(ctx, core.Workspace{ID: "ws_leased", Name: "leased", AccountID: rp.acct.ID, Provider: "remu",
		State: core.StateRunning, BoxID: "b1", CreatedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := otherStore.TryLeaseWorkspace(ctx, ws.ID, "replica-B", time.Hour); !ok || err != nil {
		t.Fatalf("lease the workspace for replica B: %v %v", ok, err)
	}
	if err := a.RemoveAccount(ctx, "", rp.acct.ID); !core.IsKind(err, core.KindConflict) {
		t.Fatalf("remove while replica B holds a lease: %v, want a conflict", err)
	}
	if _, err := otherStore.GetAccount(ctx, rp.acct.ID); err != nil {
		t.Fatalf("the refused removal removed the account: %v", err)
	}
	if _, err := a.Workspace("", ws.ID); err != nil {
		t.Fatalf("the refused removal forgot the workspace: %v", err)
	}
	if err := otherStore.ReleaseWorkspaceLease(ctx, ws.ID, "replica-B"); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveAccount(ctx, "", rp.acct.ID); err != nil {
		t.Fatalf("remove once the lease was released: %v", err)
	}
	if _, err := otherStore.GetAccount(ctx, rp.acct.ID); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("account after the removal: %v, want not found", err)
	}
	if _, err := a.Workspace("", ws.ID); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("workspace after the removal: %v, want not found", err)
	}
}

// TestAccountStatusSharedByReplicas: only the replica holding an account's
// lease lists it, yet both report it ok with the time of the last good
// list, rather than the other one saying "checking" for ever, and both
// show a flag raised after they started.
func TestAccountStatusSharedByReplicas(t *testing.T) {
	rp := newReplicaPair(t, time.Second, nil)
	rp.emu.boxes["b1"] = core.Box{ID: "b1", Name: "b1", State: core.StateRunning}
	for _, svc := range rp.svcs {
		runReconciler(t, svc, core.ReconcileConfig{Interval: 100 * time.Millisecond})
	}
	lists := func(r string) int { return rp.emu.count(func() int { return rp.emu.lists[r] }) }
	testsupport.Until(t, 30*time.Second, "five lists of the account", func() bool { return lists("A")+lists("B") >= 5 })
	if lists("A") > 0 && lists("B") > 0 {
		t.Fatalf("both replicas listed the account: A %d, B %d", lists("A"), lists("B"))
	}
	for _, svc := range rp.svcs {
		testsupport.Until(t, 30*time.Second, "the account ok on both replicas", func() bool {
			st := svc.AccountStatusOf(rp.acct.ID)
			return st.State == core.AccountOK && !st.LastOKAt.IsZero()
		})
	}
	// A flag raised after both started (as the lister raises one) shows on
	// the replica that does not list the account too.
	other := rp.svcs[0]
	if lists("A") > 0 {
		other = rp.svcs[1]
	}
	flag := &core.AccountFlag{Code: core.FlagInventingBoxes, Message: "many new boxes", Since: time.Now().UTC()}
	if err := rp.stores[0].SetAccountFlag(context.Background(), rp.acct.ID, flag); err != nil {
		t.Fatal(err)
	}
	testsupport.Until(t, 30*time.Second, "the flag on the replica that does not list the account", func() bool {
		f := other.AccountStatusOf(rp.acct.ID).Flag
		return f != nil && f.Code == core.FlagInventingBoxes
	})
}
