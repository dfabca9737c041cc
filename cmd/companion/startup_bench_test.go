package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
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
// heap before companion started and their difference (companion-heap-MiB).
// Its in-run baseline (list-heap-MiB) is the least any process holding
// those workspaces needs: the slice db.ListWorkspaces returns, measured
// the same way.
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

		ready, _, stop := startInProcess(b, dir)
		if got := countWorkspaces(b, ready); got != n {
			b.Fatalf("listed %d workspaces, want %d", got, n)
		}
		getProviders(b, ready) // the modules' manifests have been read
		http.DefaultClient.CloseIdleConnections()
		inuse := heapInuse()
		b.ReportMetric(float64(inuse)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(base)/(1<<20), "baseline-heap-MiB")
		b.ReportMetric(float64(int64(inuse)-int64(base))/(1<<20), "companion-heap-MiB")
		stop()
		b.ReportMetric(listHeap(b, dir)/(1<<20), "list-heap-MiB")
	}
}

// listHeap is the heap that the store's workspaces take as db lists them,
// after a GC, with the store closed again.
func listHeap(tb testing.TB, dir string) float64 {
	tb.Helper()
	ctx := context.Background()
	base := heapInuse()
	store, err := db.Open(ctx, filepath.Join(dir, "companion.db"))
	if err != nil {
		tb.Fatal(err)
	}
	list, err := store.ListWorkspaces(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if err := store.Close(); err != nil {
		tb.Fatal(err)
	}
	inuse := heapInuse()
	runtime.KeepAlive(list)
	return float64(int64(inuse) - int64(base))
}

// startInProcess runs serve on dataDir and returns its ready line, the
// time the line took, and a stop function.
func startInProcess(tb testing.TB, dataDir string) (readyLine, time.Duration, func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	f := &serverFlags{dataDir: dataDir, listen: "127.0.0.1:0", dockerScope: "bench-startup", reconcileInterval: time.Hour,
		timeouts: httpTimeouts{header: 10 * time.Second, body: 10 * time.Second, idle: time.Minute}}
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- serve(ctx, modeDesktop, f, slog.New(slog.DiscardHandler), pw) }()
	var ready readyLine
	line, err := bufio.NewReader(pr).ReadBytes('\n')
	took := time.Since(began)
	if err != nil || json.Unmarshal(line, &ready) != nil {
		tb.Fatalf("ready line %q: %v", line, err)
	}
	go io.Copy(io.Discard, pr)
	return ready, took, func() {
		cancel()
		pw.Close()
		if err := <-done; err != nil {
			tb.Fatal(err)
		}
	}
}

// countWorkspaces lists the workspaces over HTTP (waiting, as any client
// does, until they are loaded).
func countWorkspaces(tb testing.TB, ready readyLine) int {
	tb.Helper()
	req, _ := http.NewRequest("GET", ready.URL+"/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+ready.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Workspaces []json.RawMessage `json:"workspaces"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		tb.Fatal(err)
	}
	return len(list.Workspaces)
}

// getProviders lists the providers, which waits for their manifests.
func getProviders(tb testing.TB, ready readyLine) {
	tb.Helper()
	req, _ := http.NewRequest("GET", ready.URL+"/v1/providers", nil)
	req.Header.Set("Authorization", "Bearer "+ready.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /v1/providers: %s", resp.Status)
	}
}

// bareReady is the in-run baseline: listen on loopback, serve net/http
// and print a ready line, nothing else.
func bareReady(tb testing.TB) time.Duration {
	began := time.Now()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	_ = json.NewEncoder(io.Discard).Encode(readyLine{Event: "ready", URL: "http://" + ln.Addr().String()})
	took := time.Since(began)
	srv.Close()
	return took
}

// BenchmarkReadyLine measures, in process, the time from serve's start to
// its ready line on stores of 0, 10,000 and 100,000 workspaces, next to a
// bare net/http server's (the in-run baseline), and the time until the
// workspaces are loaded and listed. The ready line should not grow with
// the store; loading does. In process there is no exec, so the bare
// figure is far below a process's (internal/benchrun measures exec to
// ready line); what matters here is that ready-ms is flat across sizes.
func BenchmarkReadyLine(b *testing.B) {
	for _, n := range []int{0, 10000, 100000} {
		b.Run(fmt.Sprintf("workspaces=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			if n > 0 {
				seedStore(b, dir, n)
			}
			var ready, bare, loaded time.Duration
			for b.Loop() {
				bare += bareReady(b)
				line, took, stop := startInProcess(b, dir)
				ready += took
				began := time.Now()
				if got := countWorkspaces(b, line); got != n {
					b.Fatalf("listed %d workspaces, want %d", got, n)
				}
				loaded += took + time.Since(began)
				stop()
			}
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
			b.ReportMetric(per(ready), "ready-ms")
			b.ReportMetric(per(bare), "bare-ready-ms")
			b.ReportMetric(per(loaded), "listed-ms")
		})
	}
}
