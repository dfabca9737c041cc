package core_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
	"github.com/canvasapp/companion/secrets"
	"github.com/canvasapp/companion/webhooks"
)

// TestDeadReplicasExportFailedOnce: a replica died in the middle of an
// export (its journal entry and the workspace's lease lapse, the record
// stays running). Of two live replicas on the same PostgreSQL database,
// each with the webhooks service as its event sink, the one that takes the
// entry over fails the record, and the owner's webhook gets exactly one
// export.failed naming it, however many recovery passes follow.
func TestDeadReplicasExportFailedOnce(t *testing.T) {
	ctx := context.Background()
	ttl := time.Second
	url := pgtest.NewDatabase(t)
	emu := &replicaEmu{boxes: map[string]core.Box{"b1": {ID: "b1", Name: "b1", State: core.StateRunning}}, lists: map[string]int{}}
	acct := core.Account{ID: "acct-r", Owner: "alice", Provider: "remu", Label: "shared"}
	key, _ := secrets.ParseKey(secrets.GenerateKey())
	var stores [2]*passCounter
	var hooks [2]*webhooks.Hooks
	var svcs [2]*core.Service
	for i, name := range []string{"A", "B"} {
		st, err := db.OpenPostgres(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		stores[i] = &passCounter{PGStore: st}
		inst, err := st.InstanceID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := secrets.OpenSealed(ctx, st, inst, key)
		if err != nil {
			t.Fatal(err)
		}
		if hooks[i], err = webhooks.New(webhooks.Config{Store: st, Secrets: keys, AllowPrivate: true}); err != nil {
			t.Fatal(err)
		}
		reg := &core.Registry{}
		reg.Register("remu", replicaView{emu, name})
		svcs[i] = newTestService(t, ctx, core.Config{Store: stores[i], Providers: reg, LeaseTTL: ttl, Events: hooks[i],
			Logger: slog.New(slog.NewTextHandler(&testsupport.SyncBuffer{}, nil))})
		hooks[i].Attach(svcs[i])
	}
	st := stores[0].PGStore
	if err := st.PutAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	ws, err := st.SaveWorkspace(ctx, core.Workspace{ID: "ws-x", Owner: "alice", Name: "x", AccountID: acct.ID, Provider: "remu",
		State: core.StateRunning, BoxID: "b1", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec := core.ExportRecord{ID: "exp_dead", WorkspaceID: ws.ID, Owner: ws.Owner, WorkspaceName: ws.Name, Provider: ws.Provider,
		AccountID: ws.AccountID, CreatedAt: now, UpdatedAt: now, State: core.ExportRunning}
	if err := st.PutExport(ctx, rec); err != nil {
		t.Fatal(err)
	}
	op, err := st.PutOp(ctx, core.Op{WorkspaceID: ws.ID, Kind: core.OpExport, Step: "capture", Attempts: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.ClaimOp(ctx, op.ID, "dead-replica", ttl); !ok || err != nil {
		t.Fatalf("claim as the dead replica: %v %v", ok, err)
	}
	if ok, _, err := st.TryLeaseWorkspace(ctx, ws.ID, "dead-replica", ttl); !ok || err != nil {
		t.Fatalf("lease as the dead replica: %v %v", ok, err)
	}
	hook, _, err := hooks[0].Create(ctx, "alice", webhooks.CreateRequest{URL: "http://127.0.0.1:9/h", Events: []string{core.EventExportFailed}})
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for _, svc := range svcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := svc.Recover(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	testsupport.Poll(t, 30*time.Second, func() error {
		got, err := st.GetExport(ctx, rec.ID)
		if err != nil {
			return err
		}
		ops, err := st.OpsOfWorkspace(ctx, ws.ID)
		if err != nil {
			return err
		}
		if got.State != core.ExportFailed || len(ops) != 0 {
			return fmt.Errorf("export %s, %d open journal entries", got.State, len(ops))
		}
		return nil
	})
	// Later passes of both replicas find nothing more to report.
	p0, p1 := stores[0].passes.Load(), stores[1].passes.Load()
	testsupport.Until(t, 30*time.Second, "more recovery passes", func() bool {
		return stores[0].passes.Load() >= p0+2 && stores[1].passes.Load() >= p1+2
	})
	ds, err := hooks[1].Deliveries(ctx, "alice", hook.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Event != core.EventExportFailed || ds[0].EventID != core.EventID(core.EventExportFailed, rec.ID) {
		t.Fatalf("deliveries %+v; want one export.failed of %s", ds, rec.ID)
	}
}
