package uibridge

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// BenchmarkConnectStorm: 1,000 clients connect, 50 handshakes in flight,
// and each reads the whole snapshot of 10,000 workspaces. Clients at one
// revision share one snapshot encoding; the figure is the time until the
// last client has its snapshot, and how many encodings were made.
func BenchmarkConnectStorm(b *testing.B) {
	const clients, inFlight = 1000, 50
	e := benchEnv(b, benchDB(b))
	var encodings int64
	for b.Loop() {
		before := e.srv.hub.snapEncodings.Load()
		sem := make(chan struct{}, inFlight)
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for range clients {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				c, _, err := e.dial(context.Background(), "", nil)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				_, r, err := c.NextReader()
				if err == nil {
					_, err = io.Copy(io.Discard, r)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		encodings = e.srv.hub.snapEncodings.Load() - before
		eventually2(b, func() bool { return e.srv.hub.clientCount() == 0 })
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/storm")
	b.ReportMetric(float64(encodings), "encodings/storm")
}

// BenchmarkFanoutBareHub is BenchmarkFanout's in-run baseline: the least
// a gorilla/websocket hub can do for one change and 1,000 loopback
// clients (one prepared message, a writer goroutine per client), with no
// store, feed, owner filter or queue limits. Latency runs from the
// broadcast to each client having read the message.
func BenchmarkFanoutBareHub(b *testing.B) {
	const clients = 1000
	type bareClient struct {
		send chan *websocket.PreparedMessage
	}
	var mu sync.Mutex
	var all []*bareClient
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		bc := &bareClient{send: make(chan *websocket.PreparedMessage, 64)}
		mu.Lock()
		all = append(all, bc)
		mu.Unlock()
		go func() {
			for {
				if _, _, err := conn.NextReader(); err != nil {
					close(bc.send)
					return
				}
			}
		}()
		for pm := range bc.send {
			conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := conn.WritePreparedMessage(pm); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFanout(clients)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	for range clients {
		c, _, err := wsDial(ctx, url, &dialOptions{Subprotocols: []string{Subprotocol}})
		if err != nil {
			b.Fatalf("dial: %v", err)
		}
		f.read(c)
	}
	eventually2(b, func() bool { mu.Lock(); defer mu.Unlock(); return len(all) == clients })
	ws := benchWorkspace(1, time.Now())
	for i := int64(1); b.Loop(); i++ {
		start := time.Now()
		ws.Rev = i
		pm := prepare(upsertFrame(i, start, encodeWorkspace(ws)))
		mu.Lock()
		for _, bc := range all {
			bc.send <- pm
		}
		mu.Unlock()
		f.round(b, i, start)
	}
	b.StopTimer()
	f.report(b)
	cancel()
	f.close()
}
