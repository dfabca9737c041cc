package uibridge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
)

// Environment of the idle-client helper process (see TestMain).
const (
	helperClientsEnv = "UIBRIDGE_HELPER_CLIENTS"
	helperURLEnv     = "UIBRIDGE_HELPER_URL"
)

func TestMain(m *testing.M) {
	if n := os.Getenv(helperClientsEnv); n != "" {
		os.Exit(runIdleClients(n, os.Getenv(helperURLEnv)))
	}
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

const benchWorkspaces = 10_000

var (
	benchOnce sync.Once
	benchDir  string
	benchPath string
	benchErr  error
)

// benchDB returns the path of a database holding 10,000 workspaces, made
// once per test binary and copied for each benchmark run, so that every
// run starts from the same state.
func benchDB(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "uibridge-bench-")
		if benchErr != nil {
			return
		}
		benchPath = filepath.Join(benchDir, "seed.db")
		ctx := context.Background()
		st, err := db.Open(ctx, benchPath)
		if err != nil {
			benchErr = err
			return
		}
		defer st.Close()
		feed, err := core.NewFeed(ctx, st)
		if err != nil {
			benchErr = err
			return
		}
		base := time.Now().UTC().Add(-30 * 24 * time.Hour)
		for i := range benchWorkspaces {
			if _, benchErr = feed.Save(ctx, benchWorkspace(i, base)); benchErr != nil {
				return
			}
		}
	})
	if benchErr != nil {
		b.Fatalf("seed database: %v", benchErr)
	}
	dst := filepath.Join(b.TempDir(), "companion.db")
	st, err := db.Open(context.Background(), benchPath)
	if err != nil {
		b.Fatal(err)
	}
	st.Close() // checkpoints the WAL into the file
	data, err := os.ReadFile(benchPath)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		b.Fatal(err)
	}
	return dst
}

// benchWorkspace is a realistic workspace: half paused with a size.
func benchWorkspace(i int, base time.Time) core.Workspace {
	ws := core.Workspace{
		ID:             core.NewID("ws"),
		Name:           fmt.Sprintf("project %05d", i),
		AccountID:      "acc_local",
		Provider:       "docker",
		State:          core.StateRunning,
		BoxID:          fmt.Sprintf("%064x", i),
		BoxURL:         "http://127.0.0.1:" + strconv.Itoa(30000+i%30000),
		Lifecycle:      core.Lifecycle{IdlePauseAfter: 30 * time.Minute},
		LastActivityAt: base.Add(time.Duration(i) * time.Minute),
		CreatedAt:      base.Add(time.Duration(i) * time.Second),
	}
	if i%2 == 1 {
		ws.State = core.StatePaused
		ws.PausedAt = base.Add(time.Duration(i) * time.Minute)
		ws.Size = &core.Size{Bytes: int64(i) << 20, Source: core.SizeDockerEngineUsed, At: ws.PausedAt}
	}
	return ws
}

func benchEnv(b *testing.B, path string) *testEnv {
	b.Helper()
	st, err := db.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return newEnvWith(b, st, &core.Registry{}, func(c *Config) {
		c.Logger = slogTo(io.Discard)
		c.ClientQueue = 4096
	})
}

// BenchmarkSnapshot10k builds and encodes a snapshot of 10,000 workspaces.
// "cached" is the stream's path (the hub's encoded cache, concatenated
// and prepared once; here every round is a new revision, so it encodes);
// "cached-table" is the same in table form (?snapshot=table);
// "cold" encodes every workspace from scratch, as at start-up;
// "websocket" is a client connecting and reading the whole snapshot over
// loopback, "websocket-deflate" the same with compression negotiated.
// Clients of the same revision share one encoding, so a connect storm
// costs the writes only.
func BenchmarkSnapshot10k(b *testing.B) {
	e := benchEnv(b, benchDB(b))
	for _, table := range []bool{false, true} {
		name := "cached"
		if table {
			name = "cached-table"
		}
		b.Run(name, func(b *testing.B) {
			var size int
			for b.Loop() {
				c := newClient("")
				c.table = table
				e.srv.hub.mu.Lock()
				clear(e.srv.hub.snaps) // as if the revision had moved
				e.srv.hub.mu.Unlock()
				snap, err := e.srv.hub.attachSnapshot(c)
				if err != nil {
					b.Fatal(err)
				}
				e.srv.hub.detach(c)
				if _, err := snap.message(); err != nil {
					b.Fatal(err)
				}
				size = snap.size
			}
			reportMillis(b)
			b.ReportMetric(float64(size), "bytes/snapshot")
		})
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			rev, list := e.svc.Feed().Snapshot()
			items := make([]*entry, len(list))
			for i, ws := range list {
				// The object form only: what this snapshot needs.
				items[i] = &entry{id: ws.ID, created: ws.CreatedAt, json: encodeWorkspace(ws)}
			}
			sortEntries(items)
			if _, err := websocket.NewPreparedMessage(websocket.TextMessage, encodeSnapshot(rev, time.Now(), items)); err != nil {
				b.Fatal(err)
			}
		}
		reportMillis(b)
	})
	for _, deflate := range []bool{false, true} {
		name := "websocket"
		if deflate {
			name = "websocket-deflate"
		}
		b.Run(name, func(b *testing.B) {
			var wire int64
			for b.Loop() {
				cw := &countingDialer{}
				c, _, err := e.dial(context.Background(), "", &dialOptions{Compression: deflate, HTTPClient: cw.client()})
				if err != nil {
					b.Fatal(err)
				}
				typ, r, err := c.NextReader()
				if err != nil || typ != websocket.TextMessage {
					b.Fatal(err)
				}
				io.Copy(io.Discard, r)
				c.Close()
				wire = cw.read.Load()
			}
			reportMillis(b)
			b.ReportMetric(float64(wire), "wire-bytes/snapshot")
		})
	}
}

func reportMillis(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/snapshot")
}

// BenchmarkFanout measures one change reaching 1,000 connected clients
// over real loopback WebSocket connections, with 10,000 workspaces live.
// Latency runs from just before the change is saved (SQLite write
// included) to each client having read the message. The clients run in
// the same process and share its two CPUs with the server.
func BenchmarkFanout(b *testing.B) {
	const clients = 1000
	e := benchEnv(b, benchDB(b))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	f := newFanout(clients)
	rev := e.svc.Feed().Rev()
	for range clients {
		// Joining at the current revision skips the 6 MB snapshot per
		// client, which BenchmarkSnapshot10k measures on its own.
		c, _, err := e.dial(ctx, "?since="+strconv.FormatInt(rev, 10), nil)
		if err != nil {
			b.Fatalf("dial: %v", err)
		}
		f.read(c)
	}
	eventually2(b, func() bool { return e.srv.hub.clientCount() == clients })

	_, live := e.svc.Feed().Snapshot()
	for i := 0; b.Loop(); i++ {
		ws := live[i%len(live)]
		ws.LastActivityAt = time.Now()
		start := time.Now()
		saved, err := e.svc.Feed().Save(ctx, ws)
		if err != nil {
			b.Fatal(err)
		}
		f.round(b, saved.Rev, start)
	}
	b.StopTimer()
	f.report(b)
	cancel()
	f.close()
}

// fanout is the client side of a fan-out benchmark: a reader per
// connection, and the latency of every message of every round.
type fanout struct {
	clients int
	got     chan receipt
	conns   []*websocket.Conn
	wg      sync.WaitGroup
	lat     []time.Duration // every client's latency, every round
	slowest []time.Duration // the slowest client's, per round
}

type receipt struct {
	rev int64
	at  time.Time
}

func newFanout(clients int) *fanout {
	return &fanout{clients: clients, got: make(chan receipt, clients)}
}

// read reads c until it closes, noting when each message arrived.
func (f *fanout) read(c *websocket.Conn) {
	f.conns = append(f.conns, c)
	f.wg.Go(func() {
		defer c.Close()
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			f.got <- receipt{rev: revOf(msg), at: time.Now()}
		}
	})
}

// round waits for every client to receive revision rev, sent at start.
func (f *fanout) round(b *testing.B, rev int64, start time.Time) {
	var slowest time.Duration
	for range f.clients {
		r := <-f.got
		if r.rev != rev {
			b.Fatalf("client got rev %d, want %d", r.rev, rev)
		}
		d := r.at.Sub(start)
		f.lat = append(f.lat, d)
		slowest = max(slowest, d)
	}
	f.slowest = append(f.slowest, slowest)
}

func (f *fanout) report(b *testing.B) {
	b.ReportMetric(ms(percentile(f.lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(f.lat, 99)), "p99-ms")
	b.ReportMetric(ms(percentile(f.slowest, 99)), "p99-all-clients-ms")
}

// close ends the readers (and with them the server's handlers).
func (f *fanout) close() {
	for _, c := range f.conns {
		c.Close()
	}
	f.wg.Wait()
}

// revOf reads the "rev" of a stream message without decoding all of it.
func revOf(msg []byte) int64 {
	i := bytes.Index(msg, []byte(`"rev":`))
	if i < 0 {
		return -1
	}
	rest := msg[i+6:]
	j := bytes.IndexByte(rest, ',')
	n, _ := strconv.ParseInt(string(rest[:j]), 10, 64)
	return n
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func eventually2(b *testing.B, cond func() bool) {
	testsupport.Until(b, 60*time.Second, "the clients to settle", cond)
}

// BenchmarkIdleClientMemory measures the server's memory per idle stream
// client: 1,000 clients connect from a helper process (so their own
// memory is not counted), read their snapshot and go quiet. The figure is
// the growth of the server process's live heap and goroutine stacks,
// divided by the number of clients; kernel socket buffers are not
// included.
func BenchmarkIdleClientMemory(b *testing.B) {
	const clients = 1000
	st := openStore(b)
	e := newEnvWith(b, st, &core.Registry{}, func(c *Config) { c.Logger = slogTo(io.Discard) })
	for i := range 20 {
		if _, err := e.svc.Feed().Save(context.Background(), benchWorkspace(i, time.Now())); err != nil {
			b.Fatal(err)
		}
	}
	var perClient float64
	for b.Loop() {
		before := liveBytes()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperClientsEnv+"="+strconv.Itoa(clients), helperURLEnv+"=ws://127.0.0.1:"+strconv.Itoa(e.port)+"/v1/ws")
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "ready\n" {
			b.Fatalf("helper: %q %v", line, err)
		}
		eventually2(b, func() bool { return e.srv.hub.clientCount() == clients })
		// Every writer has sent its snapshot (the helper read them all);
		// measure once they have let go of it: two readings in a row agree.
		after := liveBytes()
		testsupport.Poll(b, 60*time.Second, func() error {
			prev := after
			after = liveBytes()
			if d := after - prev; d > prev/100 || -d > prev/100 {
				return fmt.Errorf("live bytes still moving: %d then %d", prev, after)
			}
			return nil
		})
		perClient = float64(after-before) / clients
		stdin.Close()
		cmd.Wait()
		eventually2(b, func() bool { return e.srv.hub.clientCount() == 0 })
	}
	b.ReportMetric(perClient, "bytes/client")
}

// liveBytes is the heap in use plus goroutine stacks, after a full GC.
func liveBytes() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// runIdleClients is the helper process of BenchmarkIdleClientMemory: it
// connects n clients, reads their snapshots, says "ready" and keeps them
// open (answering pings) until its stdin closes.
func runIdleClients(n, url string) int {
	count, err := strconv.Atoi(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	for range count {
		c, _, err := wsDial(ctx, url, &dialOptions{
			Subprotocols: []string{Subprotocol},
			HTTPHeader:   http.Header{"Authorization": {"Bearer " + testToken}},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper dial:", err)
			return 1
		}
		if _, _, err := c.ReadMessage(); err != nil {
			fmt.Fprintln(os.Stderr, "helper read snapshot:", err)
			return 1
		}
		go func() {
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		}()
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return 0
}
