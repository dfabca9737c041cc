package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
)

// seedStore writes n paused workspaces, without boxes, into a data dir.
func seedStore(tb testing.TB, dataDir string, n int) {
	tb.Helper()
	ctx := context.Background()
	store, err := db.Open(ctx, filepath.Join(dataDir, "companion.db"))
	if err != nil {
		tb.Fatal(err)
	}
	defer store.Close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	list := make([]core.Workspace, 0, n)
	for i := range n {
		list = append(list, core.Workspace{
			ID: fmt.Sprintf("ws_seed%06d", i), Name: fmt.Sprintf("feature branch %d", i), AccountID: "local-docker", Provider: "docker",
			State: core.StatePaused, BoxID: "", PausedAt: at, LastActivityAt: at, CreatedAt: at,
			Size: &core.Size{Bytes: 1 << 30, Source: core.SizeDockerEngineUsed, At: at},
		})
	}
	if err := store.SaveWorkspaces(ctx, list); err != nil {
		tb.Fatal(err)
	}
}

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkIdleHeap starts companion in-process on a store of 0 and of
// 10,000 workspaces, waits until they are loaded (a list answers) and
// reports the heap in use after a GC with no client connected, next to the
// heap before companion started (its in-run baseline) and their
// difference.
func BenchmarkIdleHeap(b *testing.B) {
	for _, n := range []int{0, 10000} {
		b.Run(fmt.Sprintf("workspaces=%d", n), func(b *testing.B) { benchIdleHeap(b, n) })
	}
}

func benchIdleHeap(b *testing.B, n int) {
	for b.Loop() {
		dir := b.TempDir()
		seedStore(b, dir, n)
		base := heapInuse()

		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		f := &serverFlags{dataDir: dir, listen: "127.0.0.1:0", dockerScope: "bench-heap", reconcileInterval: time.Hour, timeouts: httpTimeouts{header: 10 * time.Second, body: 10 * time.Second, idle: time.Minute}}
		done := make(chan error, 1)
		go func() { done <- serve(ctx, modeDesktop, f, slog.New(slog.DiscardHandler), pw) }()
		var ready readyLine
		line, err := bufio.NewReader(pr).ReadBytes('\n')
		if err != nil || json.Unmarshal(line, &ready) != nil {
			b.Fatalf("ready line %q: %v", line, err)
		}
		go io.Copy(io.Discard, pr)
		req, _ := http.NewRequest("GET", ready.URL+"/v1/workspaces", nil)
		req.Header.Set("Authorization", "Bearer "+ready.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var list struct {
			Workspaces []json.RawMessage `json:"workspaces"`
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil || len(list.Workspaces) != n {
			b.Fatalf("list: %d workspaces, %v", len(list.Workspaces), err)
		}
		list.Workspaces = nil
		http.DefaultClient.CloseIdleConnections()
		inuse := heapInuse()
		b.ReportMetric(float64(inuse)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(base)/(1<<20), "baseline-heap-MiB")
		b.ReportMetric(float64(int64(inuse)-int64(base))/(1<<20), "companion-heap-MiB")
		cancel()
		pw.Close()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
