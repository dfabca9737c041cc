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
	svc := newTestService(t, ctx, core.Config{Store: st, Providers: reg, Logger: slog.New(slog.NewTextHandler(logs, nil)), MaxAttempts: 2})
	acct := core.Account{ID: "local-docker", Provider: "docker", Label: "Local Docker"}
	if _, err := svc.EnsureAccount(ctx, acct); err != nil {
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
	// failSave makes SaveWorkspaceReleasing fail: it reaches the
	// database with a cancelled request.
	failSave bool
}

func (r *releaseSignals) SaveWorkspaceReleasing(ctx context.Context, ws core.Workspace, holder string) (core.Workspace, error) {
	if r.failSave {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		ctx = cctx
	}
	return r.PGStore.SaveWorkspaceReleasing(ctx, ws, holder)
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

// TestSetKeepReleasesItsLeaseWithItsSave: an action whose last store work
// is a save (SetKeep) takes its lease with the re-read and lets go of it
// in the save's own statement: once it returns, another replica takes the
// lease at once, and no separate release was sent. When that save fails,
// the lease is released on its own, not left to lapse.
func TestSetKeepReleasesItsLeaseWithItsSave(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	replicaB := openPG(t, url)
	st := &releaseSignals{PGStore: openPG(t, url), released: map[string]int{}, changed: make(chan struct{}, 1)}
	svc := newTestService(t, ctx, core.Config{Store: st, Providers: &core.Registry{}, Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
	ws, err := svc.Feed().Save(ctx, core.Workspace{ID: "ws_keep", Name: "keep", AccountID: "acc", Provider: "docker",
		State: core.StateRunning, BoxID: "box1", CreatedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := svc.SetKeep(ctx, "", ws.ID, true)
	if err != nil || !kept.Keep || kept.Rev <= ws.Rev {
		t.Fatalf("keep: %+v, %v", kept, err)
	}
	if stored, err := replicaB.GetWorkspace(ctx, ws.ID); err != nil || !stored.Keep || stored.Rev != kept.Rev {
		t.Fatalf("stored after keep: %+v, %v", stored, err)
	}
	st.mu.Lock()
	separate := st.released[ws.ID]
	st.mu.Unlock()
	if separate != 0 {
		t.Fatalf("the lease was released %d times on its own; want it released by the save", separate)
	}
	if ok, _, err := replicaB.TryLeaseWorkspace(ctx, ws.ID, "replica-B", time.Hour); !ok || err != nil {
		t.Fatalf("replica B could not take the lease right after the keep: %v, %v", ok, err)
	}
	if err := replicaB.ReleaseWorkspaceLease(ctx, ws.ID, "replica-B"); err != nil {
		t.Fatal(err)
	}

	// The save fails (PostgreSQL answers a cancelled request with an
	// error): the lease is released by itself.
	st.failSave = true
	if _, err := svc.SetKeep(ctx, "", ws.ID, false); err == nil {
		t.Fatal("the keep whose save failed succeeded")
	}
	st.waitRelease(t, ws.ID, 1)
	if ok, _, err := replicaB.TryLeaseWorkspace(ctx, ws.ID, "replica-B", time.Hour); !ok || err != nil {
		t.Fatalf("replica B could not take the lease after the failed keep: %v, %v", ok, err)
	}
	if stored, err := replicaB.GetWorkspace(ctx, ws.ID); err != nil || !stored.Keep {
		t.Fatalf("the failed keep changed the workspace: %+v, %v", stored, err)
	}
}
