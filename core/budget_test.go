package core_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
)

// flaky is a provider whose create fails fast with a transient error for
// the first `fast` attempts and then hangs until its context ends, the way
// a module that times out on every call behaves. It records the deadline
// each attempt was given.
type flaky struct {
	budget     time.Duration // 0: no Budgeter
	fast       int
	retryAfter time.Duration

	mu        sync.Mutex
	deadlines []time.Time
}

func (f *flaky) Describe(context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{Name: "flaky", Capabilities: core.Capabilities{Delete: true}}, nil
}
func (f *flaky) List(context.Context, core.Account) ([]core.Box, error) { return nil, nil }
func (f *flaky) Get(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindNotFound, "no box")
}
func (f *flaky) Create(ctx context.Context, _ core.Account, _ core.CreateSpec) (core.Box, error) {
	d, _ := ctx.Deadline()
	f.mu.Lock()
	f.deadlines = append(f.deadlines, d)
	n := len(f.deadlines)
	f.mu.Unlock()
	if f.retryAfter > 0 {
		return core.Box{}, &core.Error{Kind: core.KindRateLimited, Message: "slow down", RetryAfter: f.retryAfter}
	}
	if n <= f.fast {
		return core.Box{}, core.Errorf(core.KindUnavailable, "flaky is unavailable (attempt %d)", n)
	}
	<-ctx.Done()
	return core.Box{}, core.Errorf(core.KindUnavailable, "flaky did not answer in time")
}
func (f *flaky) Suspend(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "no")
}
func (f *flaky) Resume(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "no")
}
func (f *flaky) Delete(context.Context, core.Account, string) error { return nil }

// budgeted adds a declared action budget.
type budgeted struct{ *flaky }

func (b budgeted) ActionBudget() time.Duration { return b.budget }

func (f *flaky) attempts() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.deadlines...)
}

// runCreate creates a workspace on p and waits for the action to end.
func runCreate(t *testing.T, p core.Provider, cfg core.Config) core.Workspace {
	t.Helper()
	ctx := context.Background()
	st, err := db.Open(ctx, filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := &core.Registry{}
	reg.Register("flaky", p)
	cfg.Store, cfg.Providers = st, reg
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := core.NewService(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	acct := core.Account{ID: "acc-flaky", Provider: "flaky"}
	if _, err := svc.EnsureAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	ws, err := svc.Create(ctx, "", core.CreateRequest{AccountID: acct.ID, Name: "budget"})
	if err != nil {
		t.Fatal(err)
	}
	var got core.Workspace
	testsupport.Poll(t, time.Minute, func() error {
		var err error
		if got, err = svc.Workspace("", ws.ID); err == nil && got.State == core.StateCreating {
			err = fmt.Errorf("create still running: %+v", got)
		}
		return err
	})
	return got
}

// TestRetriesShareTheActionBudget: a failed attempt is retried inside the
// deadline the first attempt had, not with a fresh timeout of its own, and
// the error says which provider and operation ran out of budget.
func TestRetriesShareTheActionBudget(t *testing.T) {
	f := &flaky{budget: 2500 * time.Millisecond, fast: 1}
	ws := runCreate(t, budgeted{f}, core.Config{MaxAttempts: 10, ActionTimeout: time.Hour})
	at := f.attempts()
	if len(at) != 2 {
		t.Fatalf("%d attempts, want 2 (one fast failure, one hang until the budget ends)", len(at))
	}
	if at[0].IsZero() || !at[0].Equal(at[1]) {
		t.Fatalf("attempts had deadlines %v and %v; they must share one", at[0], at[1])
	}
	if ws.State != core.StateError || !strings.Contains(ws.Error, "provider flaky: create ran out of its action budget of 2.5s after 2 attempt(s)") ||
		!strings.Contains(ws.Error, "did not answer in time") {
		t.Fatalf("workspace %s: %q", ws.State, ws.Error)
	}
}

// TestBudgetWithoutAdapterBudget: an adapter that declares none gets
// Config.ActionBudget for the whole action, and each attempt stays within
// ActionTimeout too.
func TestBudgetWithoutAdapterBudget(t *testing.T) {
	f := &flaky{fast: 1}
	ws := runCreate(t, f, core.Config{MaxAttempts: 10, ActionTimeout: time.Hour, ActionBudget: 2500 * time.Millisecond})
	at := f.attempts()
	if len(at) != 2 || !at[0].Equal(at[1]) {
		t.Fatalf("attempt deadlines %v", at)
	}
	if !strings.Contains(ws.Error, "ran out of its action budget of 2.5s") {
		t.Fatalf("%q", ws.Error)
	}
}

// TestRetryAfterBeyondTheBudgetEndsTheAction: when the provider asks for
// a wait longer than the budget has left, the action ends at once with
// that reason instead of sleeping past its deadline.
func TestRetryAfterBeyondTheBudgetEndsTheAction(t *testing.T) {
	f := &flaky{budget: time.Minute, retryAfter: time.Hour}
	ws := runCreate(t, budgeted{f}, core.Config{MaxAttempts: 10})
	if n := len(f.attempts()); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
	if ws.State != core.StateError || !strings.Contains(ws.Error, "create ran out of its action budget of 1m0s after 1 attempt(s) (the next attempt was due in 1h0m0s") ||
		!strings.Contains(ws.Error, "slow down") {
		t.Fatalf("workspace %s: %q", ws.State, ws.Error)
	}
}
