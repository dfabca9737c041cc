package core_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport/dockertest"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// TestMain starts the throwaway PostgreSQL the lease test uses.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestActionWaitsForAnotherProcesssLease: on a store shared by several
// processes (PostgreSQL), an action takes the workspace's lease as well as
// the in-process lock. While another replica holds the lease, a pause is
// refused as busy and the provider is not called; once released, it runs.
func TestActionWaitsForAnotherProcesssLease(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	open := func() *db.PGStore { return openPG(t, url) }
	replicaB := open()
	st := &releaseSignals{PGStore: open(), released: map[string]int{}, changed: make(chan struct{}, 1)}
	prov, err := docker.New(docker.Config{Image: dockertest.BoxImage(t), Scope: dockertest.Scope(t), StopTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prov.Close() })
	reg := &core.Registry{}
	reg.Register("docker", prov)
	logs := &bytes.Buffer{}
	svc, err := core.NewService(ctx, core.Config{Store: st, Providers: reg, Logger: slog.New(slog.NewTextHandler(logs, nil)), MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		svc.Close(cctx)
	})
	acct := core.Account{ID: "local-docker", Provider: "docker", Label: "Local Docker"}
	if err := svc.EnsureAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, svc: svc, logs: logs}
	ws, err := svc.Create(ctx, "", core.CreateRequest{AccountID: acct.ID, Name: "leased"})
	if err != nil {
		t.Fatal(err)
	}
	ws = e.waitState(ws.ID, core.StateRunning)
	t.Cleanup(func() { prov.Delete(context.Background(), acct, ws.BoxID) })
	// "running" is published just before the create lets go of its lease:
	// wait for that release, or replica B could find the lease still held.
	st.waitRelease(t, ws.ID, 1)

	if ok, _, err := replicaB.TryLeaseWorkspace(ctx, ws.ID, "replica-B", time.Hour); !ok || err != nil {
		t.Fatalf("replica B could not take the lease of an idle workspace: %v, %v", ok, err)
	}
	if _, err := svc.Pause(ctx, "", ws.ID); !core.IsKind(err, core.KindConflict) {
		t.Fatalf("pause while another replica holds the lease: %v, want a conflict", err)
	}
	if got, _ := svc.Workspace("", ws.ID); got.State != core.StateRunning {
		t.Fatalf("the refused pause changed the workspace: %+v", got)
	}
	if err := replicaB.ReleaseWorkspaceLease(ctx, ws.ID, "replica-B"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Pause(ctx, "", ws.ID); err != nil {
		t.Fatalf("pause after the lease was released: %v", err)
	}
	e.waitState(ws.ID, core.StatePaused)
	// The action releases its lease just after publishing its outcome:
	// replica B gets it then.
	st.waitRelease(t, ws.ID, 2)
	if ok, _, err := replicaB.TryLeaseWorkspace(ctx, ws.ID, "replica-B", time.Hour); !ok || err != nil {
		t.Fatalf("replica B could not take the lease the finished pause released: %v, %v", ok, err)
	}
}

// releaseSignals is the service's PostgreSQL store, counting the
// service's releases of workspace leases so the test can wait for one.
type releaseSignals struct {
	*db.PGStore
	mu       sync.Mutex
	released map[string]int
	changed  chan struct{} // a token per release
}

func (r *releaseSignals) ReleaseWorkspaceLease(ctx context.Context, id, holder string) error {
	err := r.PGStore.ReleaseWorkspaceLease(ctx, id, holder)
	r.mu.Lock()
	r.released[id]++
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
	return err
}

// waitRelease waits until the service has released id's lease n times.
func (r *releaseSignals) waitRelease(t *testing.T, id string, n int) {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		got := r.released[id]
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-r.changed:
		case <-timeout.C:
			t.Fatalf("the service released the lease of %s %d times, want %d", id, got, n)
		}
	}
}

// openPG opens a store on the database at url, closed when the test ends:
// one replica's view of a shared database.
func openPG(t *testing.T, url string) *db.PGStore {
	t.Helper()
	s, err := db.OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
