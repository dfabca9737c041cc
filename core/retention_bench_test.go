package core_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
)

// retentionBenchN is the store size of BenchmarkRetentionTick.
const retentionBenchN = 100_000

// benchRetentionService opens a service on a store of retentionBenchN
// paused workspaces of one account with a 7-day policy: all scheduled
// (delete_after set as the service would), spread over the next week,
// the 1,000 inside the one-day warning window already warned, none due.
// That is the steady state a tick meets almost every minute.
func benchRetentionService(b *testing.B) (*core.Service, *fakeclock.Clock) {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "companion.db")
	st, err := db.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if err := st.PutAccount(ctx, core.Account{ID: retAccount, Provider: "ret", Label: "bench", CreatedAt: now}); err != nil {
		b.Fatal(err)
	}
	const week = 7 * 24 * time.Hour
	if err := st.PutRetentionPolicy(ctx, core.RetentionPolicy{AccountID: retAccount, Enabled: true, PausedFor: week,
		WarnBefore: 24 * time.Hour, UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	const warned = 1000
	batch := make([]core.Workspace, 0, 10_000)
	for i := range retentionBenchN {
		var pausedAt time.Time
		if i < warned { // 6 days and a bit ago: inside the warning window
			pausedAt = now.Add(-6*24*time.Hour - time.Duration(i+1)*time.Second)
		} else { // between 1 and 6 days ago
			pausedAt = now.Add(-24*time.Hour - time.Duration(i)*(5*24*time.Hour/retentionBenchN))
		}
		batch = append(batch, core.Workspace{ID: fmt.Sprintf("ws_ret%07d", i), Name: "bench", AccountID: retAccount, Provider: "ret",
			State: core.StatePaused, BoxID: fmt.Sprintf("box%07d", i), PausedAt: pausedAt, StopReason: core.StopCompanion,
			DeleteAfter: pausedAt.Add(week), CreatedAt: pausedAt.Add(-time.Hour)})
		if len(batch) == cap(batch) {
			if err := st.SaveWorkspaces(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	for i := range warned {
		pausedAt := now.Add(-6*24*time.Hour - time.Duration(i+1)*time.Second)
		if err := st.MarkRetentionWarned(ctx, fmt.Sprintf("ws_ret%07d", i), pausedAt.Add(week)); err != nil {
			b.Fatal(err)
		}
	}
	clock := fakeclock.New(now)
	reg := &core.Registry{}
	reg.Register("ret", &retProvider{boxes: map[string]core.Box{}})
	svc, err := core.NewService(ctx, core.Config{Store: st, Providers: reg, Clock: clock, ScheduledDeletion: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close(ctx) })
	return svc, clock
}

// BenchmarkRetentionTick: one retention tick over 100,000 scheduled
// workspaces, its slice of the warnings sweep included. The baseline,
// "full-scan", is the
// cheapest tick without the index: a pass over the in-memory feed looking
// for due workspaces.
func BenchmarkRetentionTick(b *testing.B) {
	svc, clock := benchRetentionService(b)
	ctx := context.Background()
	b.Run("indexed", func(b *testing.B) {
		for b.Loop() {
			rep := svc.RetentionTick(ctx, core.RetentionConfig{})
			if rep.Err != nil || rep.Started+rep.Warned+rep.Skipped != 0 {
				b.Fatalf("steady-state tick did something: %+v", rep)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/tick")
	})
	b.Run("full-scan", func(b *testing.B) {
		for b.Loop() {
			_, all := svc.Feed().Snapshot()
			due := 0
			for _, ws := range all {
				if !ws.DeleteAfter.IsZero() && !ws.DeleteAfter.After(clock.Now()) {
					due++
				}
			}
			if due != 0 || len(all) != retentionBenchN {
				b.Fatalf("%d due of %d", due, len(all))
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/tick")
	})
}
