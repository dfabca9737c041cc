package db_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
)

// openPGPair opens two stores on one fresh database: two replicas.
func openPGPair(t *testing.T) (*db.PGStore, *db.PGStore) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	return openPGStore(t, url), openPGStore(t, url)
}

// TestAccountLeases: the reconciler's account lease is exclusive across
// stores, renewable and released only by its holder, and taken over once
// it lapsed.
func TestAccountLeases(t *testing.T) {
	ctx := context.Background()
	a, b := openPGPair(t)
	try := func(s *db.PGStore, id, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.TryLeaseAccount(ctx, id, holder, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !try(a, "acct", "A", time.Hour) || try(b, "acct", "B", time.Hour) {
		t.Fatal("the account lease is not exclusive")
	}
	if !try(a, "acct", "A", time.Hour) {
		t.Fatal("A could not renew its lease")
	}
	if err := b.ReleaseAccountLease(ctx, "acct", "B"); err != nil {
		t.Fatal(err)
	}
	if try(b, "acct", "B", time.Hour) {
		t.Fatal("B's release freed A's lease")
	}
	if !try(a, "acct", "A", 0) { // A "dies": no time left
		t.Fatal("A could not renew its lease")
	}
	if !try(b, "acct", "B", time.Hour) {
		t.Fatal("a lapsed lease was not taken over")
	}
}

// TestClaimLapsedOpsOnce: many claimers on two stores race for the same
// lapsed journal entries; each entry goes to exactly one of them. Entries
// whose claim is live, or whose workspace is leased, are not claimed.
func TestClaimLapsedOpsOnce(t *testing.T) {
	ctx := context.Background()
	a, b := openPGPair(t)
	const n = 40
	now := time.Now()
	ids := map[int64]bool{}
	for i := range n {
		op, err := a.PutOp(ctx, core.Op{WorkspaceID: fmt.Sprintf("w%d", i), Kind: core.OpPause, Step: "requested", CreatedAt: now, UpdatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		ids[op.ID] = true
	}
	held, err := a.PutOp(ctx, core.Op{WorkspaceID: "held", Kind: core.OpPause, Step: "requested", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := a.ClaimOp(ctx, held.ID, "runner", time.Hour); !ok || err != nil {
		t.Fatalf("claim a new entry: %v %v", ok, err)
	}
	leased, err := a.PutOp(ctx, core.Op{WorkspaceID: "leased", Kind: core.OpPause, Step: "requested", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := a.TryLeaseWorkspace(ctx, "leased", "runner", time.Hour); !ok || err != nil {
		t.Fatalf("lease: %v %v", ok, err)
	}

	var mu sync.Mutex
	got := map[int64][]string{}
	var wg sync.WaitGroup
	for c := range 8 {
		st := a
		if c%2 == 1 {
			st = b
		}
		holder := fmt.Sprintf("claimer-%d", c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ops, err := st.ClaimLapsedOps(ctx, holder, time.Hour, 3)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ops) == 0 {
					return
				}
				mu.Lock()
				for _, op := range ops {
					got[op.ID] = append(got[op.ID], holder)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for id := range ids {
		if len(got[id]) != 1 {
			t.Errorf("entry %d claimed by %v", id, got[id])
		}
	}
	if len(got[held.ID]) != 0 || len(got[leased.ID]) != 0 {
		t.Errorf("a held entry (%v) or a leased workspace's (%v) was claimed", got[held.ID], got[leased.ID])
	}
	// Renewal keeps the holder's own and reports another's as lost; a
	// release frees the entry.
	var some int64
	for id := range ids {
		some = id
		break
	}
	owner := got[some][0]
	lost, err := b.RenewOpClaims(ctx, owner, []int64{some, held.ID, 1 << 40}, time.Hour)
	if err != nil || len(lost) != 1 || lost[0] != held.ID {
		t.Fatalf("renew: lost %v, %v; want only the entry another holder has", lost, err)
	}
	if ok, _ := b.ClaimOp(ctx, some, "other", time.Hour); ok {
		t.Fatal("a held claim was taken")
	}
	if err := b.ReleaseOpClaim(ctx, some, owner); err != nil {
		t.Fatal(err)
	}
	ops, err := b.ClaimLapsedOps(ctx, "other", time.Hour, 10)
	if err != nil || len(ops) != 1 || ops[0].ID != some {
		t.Fatalf("after a release: %v %v", ops, err)
	}
}

// TestRetentionWarnedOnce: replicas recording the same warning at once
// hear "first" once; a new delete_after is a new warning.
func TestRetentionWarnedOnce(t *testing.T) {
	ctx := context.Background()
	a, b := openPGPair(t)
	at := time.Unix(1700000000, 0)
	var firsts sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for i := range 10 {
		st := a
		if i%2 == 1 {
			st = b
		}
		firsts.Add(1)
		go func() {
			defer firsts.Done()
			first, err := st.MarkRetentionWarnedOnce(ctx, "w", at)
			if err != nil {
				t.Error(err)
			}
			if first {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	firsts.Wait()
	if n != 1 {
		t.Fatalf("%d replicas were first to warn", n)
	}
	if first, err := a.MarkRetentionWarnedOnce(ctx, "w", at.Add(time.Hour)); !first || err != nil {
		t.Fatalf("a new delete_after: %v %v", first, err)
	}
}
