package db_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/canvasapp/companion/db"
)

// fill saves n workspaces with realistic contents.
func fill(b *testing.B, s *db.Store, n int) {
	b.Helper()
	for i := range n {
		ws := fullWorkspace(fmt.Sprintf("ws_%05d", i))
		if _, err := s.SaveWorkspace(context.Background(), ws); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSaveWorkspace measures one upsert (a revision bump and a row
// write, committed) on a table of 1,000 workspaces.
func BenchmarkSaveWorkspace(b *testing.B) {
	s, _ := openTemp(b)
	fill(b, s, 1000)
	ctx := context.Background()
	ws := fullWorkspace("")
	for i := 0; b.Loop(); i++ {
		ws.ID = fmt.Sprintf("ws_%05d", i%1000)
		if _, err := s.SaveWorkspace(ctx, ws); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "upserts/s")
}

// BenchmarkSaveWorkspaceParallel is the same from many goroutines at once.
func BenchmarkSaveWorkspaceParallel(b *testing.B) {
	s, _ := openTemp(b)
	fill(b, s, 1000)
	ctx := context.Background()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ws := fullWorkspace("")
		for i := 0; pb.Next(); i++ {
			ws.ID = fmt.Sprintf("ws_%05d", i%1000)
			if _, err := s.SaveWorkspace(ctx, ws); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "upserts/s")
}

// BenchmarkListWorkspaces10k loads 10,000 live workspaces, as a start-up
// does.
func BenchmarkListWorkspaces10k(b *testing.B) {
	s, _ := openTemp(b)
	fill(b, s, 10_000)
	ctx := context.Background()
	for b.Loop() {
		list, err := s.ListWorkspaces(ctx)
		if err != nil || len(list) != 10_000 {
			b.Fatalf("ListWorkspaces: %d, %v", len(list), err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/list")
}

// BenchmarkChangesSince is a reconnecting client catching up on the last
// 100 changes among 10,000 workspaces.
func BenchmarkChangesSince(b *testing.B) {
	s, _ := openTemp(b)
	fill(b, s, 10_000)
	ctx := context.Background()
	since := int64(10_000 - 100)
	for b.Loop() {
		changes, _, complete, err := s.Changes(ctx, since)
		if err != nil || !complete || len(changes) != 100 {
			b.Fatalf("Changes: %d, %v, %v", len(changes), complete, err)
		}
	}
}

// BenchmarkCurrentRevision is core.NewFeed's question: the current
// revision only, without scanning.
func BenchmarkCurrentRevision(b *testing.B) {
	s, _ := openTemp(b)
	fill(b, s, 10_000)
	ctx := context.Background()
	for b.Loop() {
		if _, _, complete, err := s.Changes(ctx, 1<<62); err != nil || complete {
			b.Fatal(complete, err)
		}
	}
}
