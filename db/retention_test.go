package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

var retNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// TestRetentionClaimsAcrossTwoStores: two Store handles on one SQLite file
// (as two server processes would have) claim the same 200 rows at once;
// every row is claimed by exactly one of them. An expired lease is taken
// over; a live one and a backoff are not.
func TestRetentionClaimsAcrossTwoStores(t *testing.T) {
	a, path := openTemp(t)
	b := openAt(t, path)
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()
	const n = 200
	won := make([]map[string]bool, 2)
	var wg sync.WaitGroup
	for i, s := range []interface {
		ClaimRetention(context.Context, string, string, time.Time, time.Duration) (core.RetentionClaim, bool, error)
	}{a, b} {
		won[i] = map[string]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range n {
				id := fmt.Sprintf("ws_%03d", j)
				_, ok, err := s.ClaimRetention(ctx, id, fmt.Sprintf("holder%d", i), retNow, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				won[i][id] = ok
			}
		}()
	}
	wg.Wait()
	for j := range n {
		id := fmt.Sprintf("ws_%03d", j)
		if won[0][id] == won[1][id] {
			t.Fatalf("%s claimed by both or neither (%v, %v)", id, won[0][id], won[1][id])
		}
	}

	// A live lease is not taken over; an expired one is, and its holder
	// can then no longer write the claim.
	if _, ok, _ := b.ClaimRetention(ctx, "ws_x", "first", retNow, time.Minute); !ok {
		t.Fatal("fresh claim refused")
	}
	if _, ok, _ := a.ClaimRetention(ctx, "ws_x", "second", retNow.Add(30*time.Second), time.Minute); ok {
		t.Fatal("a live lease was taken over")
	}
	c, ok, err := a.ClaimRetention(ctx, "ws_x", "second", retNow.Add(2*time.Minute), time.Minute)
	if err != nil || !ok || c.Holder != "second" {
		t.Fatalf("expired lease not taken over: %+v %v %v", c, ok, err)
	}
	wantKind(t, b.SaveRetentionClaim(ctx, "first", core.RetentionClaim{WorkspaceID: "ws_x", Holder: "first"}), core.KindConflict)

	// A backoff holds the claim even for its own holder until it ends.
	c.Holder, c.LeaseUntil, c.Attempts, c.NotBefore = "", time.Time{}, 1, retNow.Add(time.Hour)
	if err := a.SaveRetentionClaim(ctx, "second", c); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.ClaimRetention(ctx, "ws_x", "second", retNow.Add(30*time.Minute), time.Minute); ok {
		t.Fatal("claimed during its backoff")
	}
	c, ok, _ = b.ClaimRetention(ctx, "ws_x", "third", retNow.Add(61*time.Minute), time.Minute)
	if !ok || c.Attempts != 1 {
		t.Fatalf("after the backoff: %+v %v; want claimed with its attempts kept", c, ok)
	}
}

// TestRetentionIndexQueries: due and unwarned workspaces come from one
// account, soonest first, without tombstones, those in backoff, or those
// warned about the same delete_after.
func TestRetentionIndexQueries(t *testing.T) {
	s, path := openTemp(t)
	ctx := context.Background()
	mk := func(id, acct string, da time.Time, removed bool) {
		save(t, s, core.Workspace{ID: id, Name: id, AccountID: acct, Provider: "p", State: core.StatePaused, DeleteAfter: da, Removed: removed})
	}
	mk("ws_a", "acc1", retNow.Add(-time.Hour), false)
	mk("ws_b", "acc1", retNow.Add(-2*time.Hour), false)
	mk("ws_c", "acc1", retNow.Add(time.Hour), false)
	mk("ws_d", "acc2", retNow.Add(-time.Hour), false)
	mk("ws_e", "acc1", retNow.Add(-time.Hour), true)
	mk("ws_f", "acc1", time.Time{}, false)
	ids := func(list []core.RetentionCandidate, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, c := range list {
			out += c.WorkspaceID + " "
		}
		return out
	}
	if got := ids(s.RetentionDue(ctx, "acc1", retNow, 10)); got != "ws_b ws_a " {
		t.Fatalf("due: %q", got)
	}
	c, _, _ := s.ClaimRetention(ctx, "ws_b", "h", retNow, time.Minute)
	c.NotBefore = retNow.Add(time.Minute)
	if err := s.SaveRetentionClaim(ctx, "h", c); err != nil {
		t.Fatal(err)
	}
	if got := ids(s.RetentionDue(ctx, "acc1", retNow, 10)); got != "ws_a " {
		t.Fatalf("due with ws_b backing off: %q", got)
	}
	if err := s.MarkRetentionWarned(ctx, "ws_a", retNow.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := ids(s.RetentionUnwarned(ctx, "acc1", retNow.Add(2*time.Hour), 10)); got != "ws_b ws_c " {
		t.Fatalf("unwarned: %q", got)
	}
	// Sweeping keeps the claim of a still scheduled workspace and drops
	// the rest.
	s.ClaimRetention(ctx, "ws_f", "h", retNow, time.Minute)
	if _, err := s.SweepRetention(ctx, "", 10); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.ClaimRetention(ctx, "ws_b", "other", retNow, time.Minute); ok {
		t.Fatal("sweep dropped the backoff of a scheduled workspace")
	}
	if _, ok, _ := s.ClaimRetention(ctx, "ws_f", "other", retNow, time.Minute); !ok {
		t.Fatal("sweep kept the claim of an unscheduled workspace")
	}

	// Warnings are swept a slice at a time: stale ones (a removed
	// workspace, a delete_after that moved) go, the current one stays.
	for id, da := range map[string]time.Time{"ws_e": retNow.Add(-time.Hour), "ws_c": retNow, "ws_zz": retNow} {
		if err := s.MarkRetentionWarned(ctx, id, da); err != nil {
			t.Fatal(err)
		}
	}
	from, slices := "", 0
	for {
		next, err := s.SweepRetention(ctx, from, 1)
		if err != nil {
			t.Fatal(err)
		}
		if next == "" {
			break
		}
		from, slices = next, slices+1
	}
	if slices != 4 {
		t.Errorf("%d slices of one for 4 warnings", slices)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var left string
	if err := raw.QueryRow(`SELECT group_concat(workspace_id) FROM retention_warnings`).Scan(&left); err != nil || left != "ws_a" {
		t.Fatalf("warnings left after the sweep: %q %v; want ws_a", left, err)
	}
}
