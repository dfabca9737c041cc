package core_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// reporting is the docker adapter with a Create that reports progress
// before creating, and keeps the reporter so the test can call it late.
type reporting struct {
	*docker.Provider
	mu       sync.Mutex
	progress func(string)
}

func (r *reporting) Create(ctx context.Context, acct core.Account, spec core.CreateSpec) (core.Box, error) {
	if spec.Progress == nil {
		return core.Box{}, core.Errorf(core.KindInternal, "core passed no progress reporter")
	}
	spec.Progress("preparing the box")
	r.mu.Lock()
	r.progress = spec.Progress
	r.mu.Unlock()
	return r.Provider.Create(ctx, acct, spec)
}

// TestCreateProgressIsPublishedThenCleared: an adapter's progress line
// reaches the feed on the creating workspace, the outcome clears it, and
// a report after Create returned cannot overwrite the outcome.
func TestCreateProgressIsPublishedThenCleared(t *testing.T) {
	e := newEnv(t)
	rp := &reporting{Provider: e.prov}
	e.reg.Register("docker", rp)
	// A service of the test's own on the same store, with a clock the test
	// moves, so progress throttling cannot hide a late report.
	var clockMu sync.Mutex
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	advance := func(d time.Duration) { clockMu.Lock(); now = now.Add(d); clockMu.Unlock() }
	e.close()
	st, err := db.Open(context.Background(), filepath.Join(e.dir, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := core.NewService(context.Background(), core.Config{Store: st, Providers: e.reg, Logger: slog.New(slog.NewTextHandler(e.logs, nil)), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	e.svc, e.store = svc, st // env's cleanup closes them
	_, _, sub := e.svc.Feed().SubscribeSnapshot(256)
	defer sub.Close()

	ws, err := e.svc.Create(context.Background(), "", core.CreateRequest{AccountID: e.acct.ID, Name: "progress"})
	if err != nil {
		t.Fatal(err)
	}
	sawProgress := false
	deadline := time.After(90 * time.Second)
	for done := false; !done; {
		select {
		case ch, ok := <-sub.C:
			if !ok {
				t.Fatalf("feed subscription ended: %v", sub.Err())
			}
			w := ch.Workspace
			if w.ID != ws.ID {
				continue
			}
			if w.Progress == "preparing the box" && w.State == core.StateCreating {
				sawProgress = true
			}
			if w.State == core.StateRunning {
				if w.Progress != "" {
					t.Errorf("running workspace still shows progress %q", w.Progress)
				}
				done = true
			}
		case <-deadline:
			t.Fatalf("workspace did not reach running\n%s", e.logs)
		}
	}
	if !sawProgress {
		t.Fatal("the progress line never reached the feed")
	}
	rp.mu.Lock()
	late := rp.progress
	rp.mu.Unlock()
	advance(time.Minute)
	late("a late line")
	got, err := e.svc.Workspace("", ws.ID)
	if err != nil || got.State != core.StateRunning || got.Progress != "" {
		t.Fatalf("a late progress report changed the outcome: %+v %v", got, err)
	}
}
