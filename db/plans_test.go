package db_test

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

func TestPlanRoundTripAndSingleUse(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	save(t, s, core.Workspace{ID: "ws_1"})
	now := time.Date(2025, 7, 1, 10, 0, 0, 5, time.UTC)
	newClock(s, now)
	p := core.DeletePlan{
		TokenHash:      core.HashToken("secret-token"),
		WorkspaceID:    "ws_1",
		State:          core.StatePaused,
		BoxID:          "box-1",
		LastActivityAt: now.Add(-time.Hour),
		CreatedAt:      now,
		ExpiresAt:      now.Add(10 * time.Minute),
	}
	if err := s.PutPlan(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := s.TakePlan(ctx, p.TokenHash, "ws_1", now.Add(time.Minute))
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("TakePlan = %+v, %v; want %+v", got, err, p)
	}
	_, err = s.TakePlan(ctx, p.TokenHash, "ws_1", now.Add(time.Minute))
	wantKind(t, err, core.KindNotFound)
	_, err = s.TakePlan(ctx, "never-issued", "ws_1", now)
	wantKind(t, err, core.KindNotFound)

	// A token sent for another workspace is refused and not spent.
	p.TokenHash = core.HashToken("second-token")
	save(t, s, core.Workspace{ID: "ws_2"})
	if err := s.PutPlan(ctx, p); err != nil {
		t.Fatal(err)
	}
	_, err = s.TakePlan(ctx, p.TokenHash, "ws_2", now.Add(time.Minute))
	wantKind(t, err, core.KindNotFound)
	if _, err := s.TakePlan(ctx, p.TokenHash, "ws_1", now.Add(time.Minute)); err != nil {
		t.Fatalf("a token refused for another workspace was spent: %v", err)
	}
}

func TestPlanExpiry(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	save(t, s, core.Workspace{ID: "ws_1"})
	now := time.Date(2025, 7, 1, 10, 0, 0, 0, time.UTC)
	clk := newClock(s, now)
	exp := now.Add(10 * time.Minute)
	put := func(hash string) {
		t.Helper()
		if err := s.PutPlan(ctx, core.DeletePlan{TokenHash: hash, WorkspaceID: "ws_1", CreatedAt: now, ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}

	put("h1")
	_, err := s.TakePlan(ctx, "h1", "ws_1", exp) // valid only before ExpiresAt
	wantKind(t, err, core.KindNotFound)
	_, err = s.TakePlan(ctx, "h1", "ws_1", now) // the failed take spent it
	wantKind(t, err, core.KindNotFound)

	// Putting a plan drops the ones that expired by the store's clock.
	put("h2")
	clk.set(exp.Add(time.Second))
	put("h3")
	_, err = s.TakePlan(ctx, "h2", "ws_1", now)
	wantKind(t, err, core.KindNotFound)

	// Taking any plan drops expired ones too.
	put("h4")
	clk.set(exp.Add(time.Hour))
	if _, err := s.TakePlan(ctx, "missing", "ws_1", exp.Add(time.Hour)); !core.IsKind(err, core.KindNotFound) {
		t.Fatal(err)
	}
	if _, err := s.TakePlan(ctx, "h4", "ws_1", now); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("expired plan survived: %v", err)
	}
}

func TestTakePlanRace(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	save(t, s, core.Workspace{ID: "ws_1"})
	now := time.Now().UTC()
	if err := s.PutPlan(ctx, core.DeletePlan{TokenHash: "h", WorkspaceID: "ws_1", ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var wins, misses atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.TakePlan(ctx, "h", "ws_1", now)
			switch {
			case err == nil:
				wins.Add(1)
			case core.IsKind(err, core.KindNotFound):
				misses.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || misses.Load() != 9 {
		t.Fatalf("%d takes won and %d missed; want exactly one winner", wins.Load(), misses.Load())
	}
}

func TestPutPlanErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	exp := time.Now().Add(time.Hour)
	wantKind(t, s.PutPlan(ctx, core.DeletePlan{TokenHash: "h", WorkspaceID: "ws_none", ExpiresAt: exp}), core.KindNotFound)
	wantKind(t, s.PutPlan(ctx, core.DeletePlan{WorkspaceID: "ws_none", ExpiresAt: exp}), core.KindInvalid)
	save(t, s, core.Workspace{ID: "ws_1"})
	wantKind(t, s.PutPlan(ctx, core.DeletePlan{TokenHash: "h", WorkspaceID: "ws_1"}), core.KindInvalid)
}
