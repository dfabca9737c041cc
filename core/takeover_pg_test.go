package core_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"

	"github.com/jackc/pgx/v5"
)

// replicaEmu emulates a cloud provider's API for two replicas at once: it
// counts lists by replica and suspends, and can hold suspends at a gate.
type replicaEmu struct {
	mu       sync.Mutex
	boxes    map[string]core.Box
	lists    map[string]int // by replica
	suspends int
	gate     chan struct{} // if set, a suspend waits for it to close
	cut      int           // suspends whose caller gave up at the gate
}

// replicaView is one replica's adapter: the shared emulator, naming the
// replica in its counts.
type replicaView struct {
	*replicaEmu
	replica string
}

func (p replicaView) Describe(context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{Name: "remu", Version: "1", Kind: "wasm",
		Capabilities: core.Capabilities{List: true, Suspend: true, Delete: true}}, nil
}

func (p replicaView) List(_ context.Context, _ core.Account) ([]core.Box, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lists[p.replica]++
	var out []core.Box
	for _, b := range p.boxes {
		out = append(out, b)
	}
	return out, nil
}

func (p replicaView) Get(_ context.Context, _ core.Account, id string) (core.Box, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.boxes[id]; ok {
		return b, nil
	}
	return core.Box{}, core.Errorf(core.KindNotFound, "box %s not found", id)
}

func (p replicaView) Create(context.Context, core.Account, core.CreateSpec) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "the emulator does not create")
}

func (p replicaView) Suspend(ctx context.Context, _ core.Account, id string) (core.Box, error) {
	p.mu.Lock()
	p.suspends++
	gate := p.gate
	p.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			p.mu.Lock()
			p.cut++
			p.mu.Unlock()
			return core.Box{}, ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.boxes[id]
	if !ok {
		return core.Box{}, core.Errorf(core.KindNotFound, "box %s not found", id)
	}
	b.State = core.StatePaused
	p.boxes[id] = b
	return b, nil
}

func (p replicaView) Resume(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "the emulator does not resume")
}

func (p replicaView) Delete(context.Context, core.Account, string) error {
	return core.Errorf(core.KindInvalid, "the emulator does not delete")
}

func (p *replicaEmu) count(f func() int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return f()
}

// passCounter counts a store's journal recovery passes.
type passCounter struct {
	*db.PGStore
	passes atomic.Int64
}

func (c *passCounter) ClaimLapsedOps(ctx context.Context, holder string, ttl time.Duration, limit int) ([]core.Op, error) {
	defer c.passes.Add(1)
	return c.PGStore.ClaimLapsedOps(ctx, holder, ttl, limit)
}

// replicaPair is two Services (replicas) on one PostgreSQL database.
type replicaPair struct {
	emu    *replicaEmu
	stores [2]*passCounter
	svcs   [2]*core.Service
	logs   [2]*testsupport.SyncBuffer
	acct   core.Account
	url    string
}

func newReplicaPair(t *testing.T, ttl time.Duration, before func(st *db.PGStore)) *replicaPair {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	rp := &replicaPair{emu: &replicaEmu{boxes: map[string]core.Box{}, lists: map[string]int{}},
		acct: core.Account{ID: "acct-r", Provider: "remu", Label: "shared"}, url: url}
	for i := range rp.stores {
		st, err := db.OpenPostgres(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		rp.stores[i] = &passCounter{PGStore: st}
	}
	if err := rp.stores[0].PutAccount(ctx, rp.acct); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(rp.stores[0].PGStore)
	}
	for i, name := range []string{"A", "B"} {
		reg := &core.Registry{}
		reg.Register("remu", replicaView{rp.emu, name})
		rp.logs[i] = &testsupport.SyncBuffer{}
		svc := newTestService(t, ctx, core.Config{Store: rp.stores[i], Providers: reg, LeaseTTL: ttl,
			Logger: slog.New(slog.NewTextHandler(rp.logs[i], nil))})
		rp.svcs[i] = svc
	}
	return rp
}

// TestReconcilerListsAnAccountFromOneReplica: two replicas run the
// reconciler on one account; only the replica holding the account's lease
// lists it, pass after pass, and when that replica's reconciler stops the
// other one takes the account over.
func TestReconcilerListsAnAccountFromOneReplica(t *testing.T) {
	rp := newReplicaPair(t, time.Second, nil)
	rp.emu.boxes["b1"] = core.Box{ID: "b1", Name: "b1", State: core.StateRunning}
	var stops [2]func()
	for i, svc := range rp.svcs {
		stops[i] = runReconciler(t, svc, core.ReconcileConfig{Interval: 100 * time.Millisecond})
	}
	lists := func(r string) int { return rp.emu.count(func() int { return rp.emu.lists[r] }) }
	testsupport.Until(t, 30*time.Second, "ten lists of the account", func() bool { return lists("A")+lists("B") >= 10 })
	holder, other := 0, 1
	if lists("B") > lists("A") {
		holder, other = 1, 0
	}
	names := []string{"A", "B"}
	if n := lists(names[other]); n != 0 {
		t.Fatalf("both replicas listed the account: A %d times, B %d times", lists("A"), lists("B"))
	}
	// The adopted box is one workspace, not one per replica.
	if ws, err := rp.stores[0].ListWorkspaces(context.Background()); err != nil || len(ws) != 1 {
		t.Fatalf("workspaces after both replicas reconciled: %d, %v", len(ws), err)
	}
	stops[holder]()
	before := lists(names[holder])
	testsupport.Until(t, 30*time.Second, "the other replica lists the account once the holder stopped", func() bool {
		return lists(names[other]) >= 3
	})
	if lists(names[holder]) != before {
		t.Fatalf("the stopped replica went on listing")
	}
}

// TestJournalEntryResumedByOneReplica: a pause journaled by a replica that
// died (its claim lapses) is resumed by exactly one of two live replicas:
// one provider call, its claim held and renewed while the call runs, the
// entry closed once.
func TestJournalEntryResumedByOneReplica(t *testing.T) {
	ctx := context.Background()
	ttl := time.Second
	var opID int64
	gate := make(chan struct{})
	rp := newReplicaPair(t, ttl, func(st *db.PGStore) {
		ws, err := st.SaveWorkspace(ctx, core.Workspace{ID: "ws-r", Name: "r", AccountID: "acct-r", Provider: "remu",
			State: core.StatePausing, BoxID: "b1", CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		op, err := st.PutOp(ctx, core.Op{WorkspaceID: ws.ID, Kind: core.OpPause, Step: "provider_pause", Attempts: 1,
			CreatedAt: time.Now(), UpdatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		opID = op.ID
		// The dead replica held the entry's claim and the workspace's
		// lease; both lapse after ttl.
		if ok, err := st.ClaimOp(ctx, op.ID, "dead-replica", ttl); !ok || err != nil {
			t.Fatalf("claim as the dead replica: %v %v", ok, err)
		}
		if ok, _, err := st.TryLeaseWorkspace(ctx, ws.ID, "dead-replica", ttl); !ok || err != nil {
			t.Fatalf("lease as the dead replica: %v %v", ok, err)
		}
	})
	rp.emu.boxes["b1"] = core.Box{ID: "b1", Name: "b1", State: core.StateRunning}
	rp.emu.gate = gate

	var wg sync.WaitGroup
	for _, svc := range rp.svcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := svc.Recover(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	suspends := func() int { return rp.emu.count(func() int { return rp.emu.suspends }) }
	testsupport.Until(t, 30*time.Second, "a replica resumes the dead replica's pause", func() bool { return suspends() >= 1 })
	// While the call runs, both replicas keep looking for lapsed claims
	// and the claim outlives its TTL by being renewed.
	p0, p1 := rp.stores[0].passes.Load(), rp.stores[1].passes.Load()
	testsupport.Until(t, 30*time.Second, "more recovery passes on both replicas", func() bool {
		return rp.stores[0].passes.Load() >= p0+4 && rp.stores[1].passes.Load() >= p1+4
	})
	if ok, err := rp.stores[0].ClaimOp(ctx, opID, "intruder", ttl); ok || err != nil {
		t.Fatalf("the running entry's claim could be taken by another holder (%v, %v): it was not renewed", ok, err)
	}
	if n := suspends(); n != 1 {
		t.Fatalf("the pause was resumed %d times", n)
	}
	close(gate)
	testsupport.Poll(t, 30*time.Second, func() error {
		ws, err := rp.stores[1].GetWorkspace(ctx, "ws-r")
		if err != nil {
			return err
		}
		ops, err := rp.stores[1].OpsOfWorkspace(ctx, "ws-r")
		if err != nil {
			return err
		}
		if ws.State != core.StatePaused || len(ops) != 0 {
			return fmt.Errorf("workspace %s, %d open journal entries", ws.State, len(ops))
		}
		return nil
	})
	// Passes after the end find nothing to do.
	p0, p1 = rp.stores[0].passes.Load(), rp.stores[1].passes.Load()
	testsupport.Until(t, 30*time.Second, "more recovery passes", func() bool {
		return rp.stores[0].passes.Load() >= p0+2 && rp.stores[1].passes.Load() >= p1+2
	})
	if n := suspends(); n != 1 {
		t.Fatalf("the pause called the provider %d times", n)
	}
	took := 0
	for _, l := range rp.logs {
		if strings.Contains(l.String(), "taking over an action another replica left") {
			took++
		}
	}
	if took != 1 {
		t.Fatalf("%d replicas took the entry over", took)
	}
}

// TestRunStopsWhenItsClaimIsTakenOver: a replica whose claim on a running
// action passed to another holder (it could not renew it in time) stops
// the action as at a shutdown: its provider call is cut, and it neither
// records an outcome nor closes the entry, which stays with the new holder.
func TestRunStopsWhenItsClaimIsTakenOver(t *testing.T) {
	ctx := context.Background()
	rp := newReplicaPair(t, time.Second, func(st *db.PGStore) {
		if _, err := st.SaveWorkspace(ctx, core.Workspace{ID: "ws-t", Name: "t", AccountID: "acct-r", Provider: "remu",
			State: core.StateRunning, BoxID: "b1", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	})
	rp.emu.boxes["b1"] = core.Box{ID: "b1", Name: "b1", State: core.StateRunning}
	rp.emu.gate = make(chan struct{})
	defer close(rp.emu.gate)
	if _, err := rp.svcs[0].Pause(ctx, "", "ws-t"); err != nil {
		t.Fatal(err)
	}
	testsupport.Until(t, 30*time.Second, "the pause reaches the provider", func() bool {
		return rp.emu.count(func() int { return rp.emu.suspends }) == 1
	})
	conn, err := pgx.Connect(ctx, rp.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if tag, err := conn.Exec(ctx, `UPDATE ops SET claim_holder = 'thief', claim_until = clock_timestamp() + interval '1 hour'
		WHERE workspace_id = 'ws-t'`); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("steal the claim: %v %v", tag, err)
	}
	testsupport.Until(t, 30*time.Second, "the provider call is cut", func() bool {
		return rp.emu.count(func() int { return rp.emu.cut }) == 1
	})
	if !strings.Contains(rp.logs[0].String(), "another replica took over an action this one was running") {
		t.Errorf("the replica did not say why it stopped:\n%s", rp.logs[0])
	}
	ops, err := rp.stores[0].OpsOfWorkspace(ctx, "ws-t")
	if err != nil || len(ops) != 1 {
		t.Fatalf("the entry after the stop: %v, %v; want it left open", ops, err)
	}
	var holder string
	if err := conn.QueryRow(ctx, `SELECT claim_holder FROM ops WHERE id = $1`, ops[0].ID).Scan(&holder); err != nil || holder != "thief" {
		t.Fatalf("claim holder after the stop: %q, %v", holder, err)
	}
	if ws, err := rp.stores[0].GetWorkspace(ctx, "ws-t"); err != nil || ws.State != core.StatePausing {
		t.Fatalf("the stopped replica recorded an outcome: %+v, %v", ws, err)
	}
}
