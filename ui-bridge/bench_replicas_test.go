package uibridge

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
)

// BenchmarkFanoutAcrossReplicas: two replicas (two services, two
// stream servers, two PostgreSQL pools) on one database. Every round
// saves one workspace through replica A and times the frame at
// replicaClients clients of A (the single-replica path: save, publish) or
// at as many clients of B (commit, NOTIFY, B's catch-up read, publish);
// b.N rounds each.
func BenchmarkFanoutAcrossReplicas(b *testing.B) {
	const (
		replicaClients = 500
		seed           = 1000
	)
	cluster, err := pgtest.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cluster.Stop() })
	url := cluster.NewDatabase(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openPGBench(b, url)
	base := time.Now().UTC().Add(-30 * 24 * time.Hour)
	list := make([]core.Workspace, seed)
	for i := range list {
		list[i] = benchWorkspace(i, base)
	}
	if err := st.SaveWorkspaces(ctx, list); err != nil {
		b.Fatal(err)
	}
	a, r := replicaEnv(b, st), replicaEnv(b, openPGBench(b, url))

	// Each side is measured alone: while A's clients are timed, B (which
	// follows all the same) has none, and the other way round. The sides
	// take turns, half the rounds each time, so a change in the machine's
	// load during the run weighs on both alike.
	_, live := a.svc.Feed().Snapshot()
	i := 0
	measure := func(side *testEnv, f *fanout, rounds int) {
		rev := side.svc.Feed().Rev()
		for range replicaClients {
			c, _, err := side.dial(ctx, "?since="+strconv.FormatInt(rev, 10), nil)
			if err != nil {
				b.Fatalf("dial: %v", err)
			}
			f.read(c)
		}
		eventually2(b, func() bool { return side.srv.hub.clientCount() == replicaClients })
		b.StartTimer()
		for range rounds {
			ws := live[i%len(live)]
			i++
			ws.LastActivityAt = time.Now()
			start := time.Now()
			saved, err := a.svc.Feed().Save(ctx, ws)
			if err != nil {
				b.Fatal(err)
			}
			f.round(b, saved.Rev, start)
		}
		b.StopTimer()
		f.close()
		eventually2(b, func() bool { return side.srv.hub.clientCount() == 0 })
	}
	b.StopTimer()
	single, cross := newFanout(replicaClients), newFanout(replicaClients)
	for _, n := range []int{b.N / 2, b.N - b.N/2} {
		measure(a, single, n)
		measure(r, cross, n)
	}
	b.ReportMetric(ms(percentile(single.lat, 50)), "single-p50-ms")
	b.ReportMetric(ms(percentile(single.lat, 99)), "single-p99-ms")
	b.ReportMetric(ms(percentile(cross.lat, 50)), "cross-p50-ms")
	b.ReportMetric(ms(percentile(cross.lat, 99)), "cross-p99-ms")
}

func openPGBench(b testing.TB, url string) *db.PGStore {
	b.Helper()
	st, err := db.OpenPostgres(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// replicaEnv is one replica: a service on st (which follows the other
// replicas' writes) and its stream server on a loopback listener.
func replicaEnv(b testing.TB, st core.Store) *testEnv {
	b.Helper()
	log := slogTo(io.Discard)
	svc, err := core.NewService(context.Background(), core.Config{Store: st, Providers: &core.Registry{}, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv, err := New(Config{Service: svc, Token: testToken, AllowedHosts: LoopbackHosts(port), Version: "bench", Logger: log, ClientQueue: 4096})
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	b.Cleanup(func() {
		srv.Close()
		hs.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.Close(cctx)
	})
	return &testEnv{svc: svc, srv: srv, hs: hs, port: port, base: "http://127.0.0.1:" + strconv.Itoa(port), token: testToken}
}
