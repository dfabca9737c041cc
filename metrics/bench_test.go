package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/metrics"
	uibridge "github.com/canvasapp/companion/ui-bridge"
)

// BenchmarkMiddlewareOverhead measures a request to the bridge (gate,
// routing, handler: GET /v1/workspaces/{id} on a real SQLite-backed
// service) with and without the metrics middleware: "http" over loopback
// TCP as a client sees it, "handler" the handler chain alone (no network:
// the middleware's cost in nanoseconds). The two variants alternate in
// blocks within one run and each reports its fastest block, so that load
// from elsewhere on the machine weighs on both alike: off-ns/op, on-ns/op
// and overhead-% (make bench's metrics group).
func BenchmarkMiddlewareOverhead(b *testing.B) {
	ctx := context.Background()
	st, err := db.Open(ctx, filepath.Join(b.TempDir(), "companion.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := core.NewService(ctx, core.Config{Store: st, Providers: &core.Registry{}, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close(ctx)
	m := metrics.New()
	m.Domain(svc.MetricsSnapshot)
	lnOff, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	lnOn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	const token = "bench-token"
	hosts := append(uibridge.ListenerHosts(lnOff.Addr()), uibridge.ListenerHosts(lnOn.Addr())...)
	bridge, err := uibridge.New(uibridge.Config{Service: svc, Token: token, AllowedHosts: hosts, Logger: log, Metrics: m.Handler()})
	if err != nil {
		b.Fatal(err)
	}
	defer bridge.Close()
	off := bridge.Handler()
	on := m.Middleware(off)
	const path = "/v1/workspaces/ws_0123456789"

	b.Run("handler", func(b *testing.B) {
		req := httptest.NewRequest("GET", path, nil)
		req.Host = lnOff.Addr().String()
		req.Header.Set("Authorization", "Bearer "+token)
		alternate(b, 2000, func(metricsOn bool) {
			h := off
			if metricsOn {
				h = on
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusNotFound {
				b.Fatalf("GET = %d %s, want 404", w.Code, w.Body)
			}
		})
	})
	sOff, sOn := &http.Server{Handler: off}, &http.Server{Handler: on}
	go sOff.Serve(lnOff)
	go sOn.Serve(lnOn)
	defer sOff.Close()
	defer sOn.Close()
	b.Run("http", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		reqs := map[bool]*http.Request{}
		for metricsOn, ln := range map[bool]net.Listener{false: lnOff, true: lnOn} {
			req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			reqs[metricsOn] = req
		}
		alternate(b, 200, func(metricsOn bool) {
			resp, err := client.Do(reqs[metricsOn])
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				b.Fatalf("GET = %d, want 404", resp.StatusCode)
			}
		})
	})
}

// alternate runs blocks of serve(false) and serve(true) in turn until b.N
// requests are made, and reports each variant's fastest block per request.
func alternate(b *testing.B, block int, serve func(metricsOn bool)) {
	best := map[bool]time.Duration{}
	b.ResetTimer()
	for done := 0; done < b.N; done += 2 * block {
		for _, metricsOn := range []bool{false, true} {
			start := time.Now()
			for range block {
				serve(metricsOn)
			}
			d := time.Since(start)
			if cur, ok := best[metricsOn]; !ok || d < cur {
				best[metricsOn] = d
			}
		}
	}
	b.StopTimer()
	offNs, onNs := float64(best[false].Nanoseconds())/float64(block), float64(best[true].Nanoseconds())/float64(block)
	b.ReportMetric(offNs, "off-ns/op")
	b.ReportMetric(onNs, "on-ns/op")
	b.ReportMetric((onNs/offNs-1)*100, "overhead-%")
}
