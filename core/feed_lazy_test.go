package core_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/canvasapp/companion/core"
)

// listStore is a store with a fixed set of workspaces; Save appends.
type listStore struct {
	core.Store
	list []core.Workspace
	rev  int64
}

func (s *listStore) ListWorkspaces(context.Context) ([]core.Workspace, error) {
	return append([]core.Workspace(nil), s.list...), nil
}

func (s *listStore) Changes(context.Context, int64) ([]core.Workspace, int64, bool, error) {
	return nil, s.rev, false, nil
}

func (s *listStore) SaveWorkspace(_ context.Context, ws core.Workspace) (core.Workspace, error) {
	s.rev++
	ws.Rev = s.rev
	s.list = append(s.list, ws)
	return ws, nil
}

// TestLazyFeedWaitsForLoad: before Load, a snapshot subscription and a
// save both wait (nothing reads the store, nothing sees an empty set);
// after it, the subscriber gets every stored workspace at the stored
// revision and then the waiting save, in order.
func TestLazyFeedWaitsForLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &listStore{list: []core.Workspace{{ID: "ws_a"}, {ID: "ws_b"}, {ID: "ws_c"}}, rev: 3}
		f := core.NewLazyFeed(st)
		type snap struct {
			rev int64
			n   int
			sub *core.Subscription
		}
		got := make(chan snap, 1)
		go func() {
			rev, list, sub := f.SubscribeSnapshot(8)
			got <- snap{rev, len(list), sub}
		}()
		synctest.Wait()
		saved := make(chan error, 1)
		go func() {
			_, err := f.Save(context.Background(), core.Workspace{ID: "ws_d"})
			saved <- err
		}()
		synctest.Wait()
		select {
		case s := <-got:
			t.Fatalf("a snapshot of %d workspaces before Load", s.n)
		case err := <-saved:
			t.Fatalf("a save went through before Load: %v", err)
		default:
		}
		if len(st.list) != 3 {
			t.Fatal("the store was written before Load")
		}

		if err := f.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		s := <-got
		defer s.sub.Close()
		if err := <-saved; err != nil {
			t.Fatal(err)
		}
		// Both waited; either may go first, but together they account
		// for every workspace exactly once, in revision order.
		switch {
		case s.rev == 4 && s.n == 4:
		case s.rev == 3 && s.n == 3:
			if next := <-s.sub.C; next.Rev != 4 || next.Workspace.ID != "ws_d" {
				t.Fatalf("after a snapshot at rev 3, got %+v", next)
			}
		default:
			t.Fatalf("after Load: a snapshot of %d at rev %d", s.n, s.rev)
		}
		if f.Len() != 4 || f.Rev() != 4 {
			t.Fatalf("feed holds %d at rev %d, want 4 at 4", f.Len(), f.Rev())
		}
	})
}

// TestLazyFeedSaveGivesUpWithItsContext: a save waiting for Load ends
// with its context, saying what it waited for, and stores nothing.
func TestLazyFeedSaveGivesUpWithItsContext(t *testing.T) {
	st := &listStore{}
	f := core.NewLazyFeed(st)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.Save(ctx, core.Workspace{ID: "ws_x"})
	if !errors.Is(err, context.Canceled) || len(st.list) != 0 {
		t.Fatalf("save before Load with a cancelled context: %v (stored %d)", err, len(st.list))
	}
}

// TestFeedOfAccount: the per-account view follows loads, saves, a
// workspace moving to another account, and removals.
func TestFeedOfAccount(t *testing.T) {
	ctx := context.Background()
	st := &listStore{list: []core.Workspace{{ID: "ws_a", AccountID: "acc_1"}, {ID: "ws_b", AccountID: "acc_2"}}, rev: 2}
	f, err := core.NewFeed(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(acct string) string {
		var out []string
		for _, ws := range f.OfAccount(acct) {
			out = append(out, ws.ID)
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	save := func(ws core.Workspace) {
		t.Helper()
		if _, err := f.Save(ctx, ws); err != nil {
			t.Fatal(err)
		}
	}
	save(core.Workspace{ID: "ws_c", AccountID: "acc_1"})
	if got := ids("acc_1"); got != "ws_a,ws_c" {
		t.Fatalf("acc_1 after a save: %q", got)
	}
	save(core.Workspace{ID: "ws_a", AccountID: "acc_2"})
	if a, b := ids("acc_1"), ids("acc_2"); a != "ws_c" || b != "ws_a,ws_b" {
		t.Fatalf("after a move: acc_1 %q, acc_2 %q", a, b)
	}
	save(core.Workspace{ID: "ws_c", AccountID: "acc_1", Removed: true})
	if got := ids("acc_1"); got != "" {
		t.Fatalf("acc_1 after its last workspace left: %q", got)
	}
}
