package core_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
)

// countingStore counts every call the service makes to its store.
type countingStore struct {
	core.Store
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingStore) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[name]++
}

// take returns the calls counted since the last take, and resets them.
func (c *countingStore) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

func (c *countingStore) InstanceID(ctx context.Context) (string, error) {
	c.count("InstanceID")
	return c.Store.InstanceID(ctx)
}
func (c *countingStore) PutAccount(ctx context.Context, a core.Account) error {
	c.count("PutAccount")
	return c.Store.PutAccount(ctx, a)
}
func (c *countingStore) GetAccount(ctx context.Context, id string) (core.Account, error) {
	c.count("GetAccount")
	return c.Store.GetAccount(ctx, id)
}
func (c *countingStore) ListAccounts(ctx context.Context) ([]core.Account, error) {
	c.count("ListAccounts")
	return c.Store.ListAccounts(ctx)
}
func (c *countingStore) DeleteAccount(ctx context.Context, id string) error {
	c.count("DeleteAccount")
	return c.Store.DeleteAccount(ctx, id)
}
func (c *countingStore) GetWorkspace(ctx context.Context, id string) (core.Workspace, error) {
	c.count("GetWorkspace")
	return c.Store.GetWorkspace(ctx, id)
}
func (c *countingStore) ListWorkspaces(ctx context.Context) ([]core.Workspace, error) {
	c.count("ListWorkspaces")
	return c.Store.ListWorkspaces(ctx)
}
func (c *countingStore) SaveWorkspace(ctx context.Context, ws core.Workspace) (core.Workspace, error) {
	c.count("SaveWorkspace")
	return c.Store.SaveWorkspace(ctx, ws)
}
func (c *countingStore) Changes(ctx context.Context, since int64) ([]core.Workspace, int64, bool, error) {
	c.count("Changes")
	return c.Store.Changes(ctx, since)
}
func (c *countingStore) PruneTombstones(ctx context.Context, cutoff time.Time, keep int) error {
	c.count("PruneTombstones")
	return c.Store.PruneTombstones(ctx, cutoff, keep)
}
func (c *countingStore) SetAccountFlag(ctx context.Context, id string, f *core.AccountFlag) error {
	c.count("SetAccountFlag")
	return c.Store.SetAccountFlag(ctx, id, f)
}
func (c *countingStore) AccountFlags(ctx context.Context) (map[string]core.AccountFlag, error) {
	c.count("AccountFlags")
	return c.Store.AccountFlags(ctx)
}
func (c *countingStore) PutOp(ctx context.Context, op core.Op) (core.Op, error) {
	c.count("PutOp")
	return c.Store.PutOp(ctx, op)
}
func (c *countingStore) DeleteOp(ctx context.Context, id int64) error {
	c.count("DeleteOp")
	return c.Store.DeleteOp(ctx, id)
}
func (c *countingStore) PendingOps(ctx context.Context) ([]core.Op, error) {
	c.count("PendingOps")
	return c.Store.PendingOps(ctx)
}
func (c *countingStore) PutPlan(ctx context.Context, p core.DeletePlan) error {
	c.count("PutPlan")
	return c.Store.PutPlan(ctx, p)
}
func (c *countingStore) TakePlan(ctx context.Context, tokenHash, workspaceID string, now time.Time) (core.DeletePlan, error) {
	c.count("TakePlan")
	return c.Store.TakePlan(ctx, tokenHash, workspaceID, now)
}

func callsString(m map[string]int) string {
	var names []string
	for n, c := range m {
		names = append(names, fmt.Sprintf("%s×%d", n, c))
	}
	sort.Strings(names)
	return fmt.Sprint(names)
}

// TestReconcilerIdlesBetweenDueTimes: with nothing due the reconciler
// touches the store not at all, however far the clock moves short of the
// next due time (it used to read the account list at every interval, with
// or without accounts); adding an account wakes it at once, and from then
// on the store sees calls only at the account's due times, never the
// account list again.
func TestReconcilerIdlesBetweenDueTimes(t *testing.T) {
	cs := &countingStore{calls: map[string]int{}}
	e := &clockEnv{t: t, path: t.TempDir() + "/companion.db", reg: &core.Registry{},
		secrets: &memSecrets{m: map[string]string{}}, logs: &bytes.Buffer{}, passes: make(chan passDone, 1000),
		wrap: func(s core.Store) core.Store { cs.Store = s; return cs }}
	e.clock = fakeclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	e.open()
	emu := newEmu("cloud")
	e.reg.Register("cloud", emu)
	// Learning the provider's clocks at its first pass rederives every
	// workspace in the background once, which reads the store at a moment
	// no due time decides: know them from the start.
	info, _ := emu.Describe(context.Background())
	e.svc.KnowClocksForTest(info)
	const interval = 15 * time.Second

	e.run(core.ReconcileConfig{Interval: interval})
	e.eventually("the reconciler's first read of the accounts", func() bool {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		return cs.calls["ListAccounts"] == 1
	})
	if !e.clock.WaitForWaiters(1, 30*time.Second) {
		t.Fatal("the reconciler never waited")
	}
	cs.take()
	// No accounts: 40 intervals pass (10 minutes) without a single call.
	for range 40 {
		e.clock.Advance(interval)
		if !e.clock.WaitForWaiters(1, 30*time.Second) {
			t.Fatal("the reconciler stopped waiting")
		}
	}
	if got := cs.take(); len(got) != 0 {
		t.Fatalf("with no accounts the reconciler called the store: %s", callsString(got))
	}

	// Adding an account wakes it: the account is listed without the
	// clock moving.
	acct := e.account("acc-1", "cloud")
	emu.addBox(acct.ID, "box-1")
	if p := e.waitPass(acct.ID); p.err != nil {
		t.Fatalf("first pass: %v", p.err)
	}
	for pass := range 5 {
		cs.take()
		due, ok := e.clock.NextDeadline()
		if !ok {
			t.Fatal("no pass scheduled")
		}
		// Up to just before the due time, in one-second steps: nothing.
		for e.clock.Now().Add(time.Second).Before(due) {
			e.clock.Advance(time.Second)
			if !e.clock.WaitForWaiters(1, 30*time.Second) {
				t.Fatal("the reconciler stopped waiting")
			}
		}
		if got := cs.take(); len(got) != 0 {
			t.Fatalf("pass %d: the store was called between due times: %s", pass, callsString(got))
		}
		e.clock.Advance(due.Sub(e.clock.Now()))
		if p := e.waitPass(acct.ID); p.err != nil {
			t.Fatalf("pass %d: %v", pass, p.err)
		}
		if got := cs.take(); got["ListAccounts"] != 0 {
			t.Fatalf("pass %d read the account list again: %s", pass, callsString(got))
		}
	}
	if n := emu.count(func() int { return emu.calls[acct.ID] }); n != 6 {
		t.Fatalf("the provider was listed %d times, want 6 (one per due time)", n)
	}
}
