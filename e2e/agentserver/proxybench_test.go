package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/agentproxy"
	"github.com/canvasapp/companion/core"
)

// BenchmarkAgentProxy measures companion's agent proxy (agentproxy) in
// front of this emulator, against the same agent-server reached directly
// in the same run:
//   - the latency of GET /api/conversations/search (50 conversations,
//     limit 20), direct and proxied requests interleaved, p50 and p99;
//   - WebSocket message throughput: a conversation's 10,000 events
//     resent on /sockets/events (resend_mode=all), direct and proxied
//     rounds interleaved, the median round of each;
//   - the memory one open proxied socket costs beyond a direct one: heap
//     and stacks in use after opening 500 of each (idle, subscribed).
func BenchmarkAgentProxy(b *testing.B) {
	const key = "bench-session-key-0123456789"
	s, err := NewServer(Config{Keys: []string{key}, ConversationsPath: filepath.Join(b.TempDir(), "conversations")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	agent := httptest.NewServer(s)
	defer agent.Close()
	px := agentproxy.New(agentproxy.Config{
		Target: func(ctx context.Context, owner, id string, fresh bool) (core.AgentAccess, error) {
			return core.AgentAccess{Endpoint: core.Endpoint{URL: agent.URL}, Key: key}, nil
		},
		Transport:   &http.Transport{MaxIdleConnsPerHost: 64},
		DialContext: (&net.Dialer{}).DialContext,
		WriteError: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
		MaxConnsPerOwner: 10000,
	})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		px.Serve(w, r, "", "ws_bench", strings.TrimPrefix(r.URL.EscapedPath(), "/agent"))
	}))
	defer front.Close()
	direct := benchTarget{base: agent.URL, hdr: http.Header{"X-Session-API-Key": {key}}}
	proxied := benchTarget{base: front.URL + "/agent", hdr: http.Header{}}

	var convs []string
	for i := range 50 {
		convs = append(convs, direct.startConversation(b, fmt.Sprintf("conversation %d", i)))
	}
	seedEvents(b, s, convs[0], 10000)

	for range b.N {
		dp50, dp99, pp50, pp99 := latencies(b, direct, proxied, 2000)
		b.ReportMetric(dp50, "direct-p50-ms")
		b.ReportMetric(dp99, "direct-p99-ms")
		b.ReportMetric(pp50, "proxied-p50-ms")
		b.ReportMetric(pp99, "proxied-p99-ms")
		dm, pm := throughput(b, direct, proxied, convs[0], 10000, 7)
		b.ReportMetric(dm, "direct-msgs/s")
		b.ReportMetric(pm, "proxied-msgs/s")
		dk, pk := socketMemory(b, direct, proxied, convs[1:21], 500)
		b.ReportMetric(dk, "direct-KiB/socket")
		b.ReportMetric(pk, "proxy-KiB/socket")
	}
}

// benchTarget is one way to the agent-server: directly with its key, or
// through the proxy with none.
type benchTarget struct {
	base string
	hdr  http.Header
}

func (t benchTarget) get(b *testing.B, path string) time.Duration {
	req, _ := http.NewRequest("GET", t.base+path, nil)
	req.Header = t.hdr.Clone()
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	return d
}

func (t benchTarget) startConversation(b *testing.B, title string) string {
	req, _ := http.NewRequest("POST", t.base+"/api/conversations",
		strings.NewReader(fmt.Sprintf(`{"agent":{"llm":{"model":"m"}},"title":%q}`, title)))
	req.Header = t.hdr.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 201 {
		b.Fatalf("start conversation: %d %v", resp.StatusCode, err)
	}
	return c.ID
}

func (t benchTarget) socket(b *testing.B, path string) *websocket.Conn {
	c, resp, err := websocket.DefaultDialer.Dial(strings.Replace(t.base, "http", "ws", 1)+path, t.hdr)
	if err != nil {
		b.Fatalf("dial %s: %v %v", path, resp, err)
	}
	return c
}

// seedEvents appends n message events to conversation id in the store.
func seedEvents(b *testing.B, s *Server, id string, n int) {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	var c *conversation
	for _, cv := range s.store.convs {
		if cv.ID.dashed() == id {
			c = cv
		}
	}
	if c == nil {
		b.Fatalf("no conversation %s", id)
	}
	for i := range n {
		m := &messageRequest{Role: "user", Content: []byte(fmt.Sprintf(`[{"type":"text","text":"event number %d of the benchmark"}]`, i))}
		if err := s.store.appendEvent(c, messageEvent(m, pyTime(time.Now()))); err != nil {
			b.Fatal(err)
		}
	}
}

// latencies times n requests each way, interleaved.
func latencies(b *testing.B, direct, proxied benchTarget, n int) (dp50, dp99, pp50, pp99 float64) {
	const path = "/api/conversations/search?limit=20"
	for range 50 { // warm both connections
		direct.get(b, path)
		proxied.get(b, path)
	}
	var d, p []time.Duration
	for range n {
		d = append(d, direct.get(b, path))
		p = append(p, proxied.get(b, path))
	}
	return pct(d, 50), pct(d, 99), pct(p, 50), pct(p, 99)
}

func pct(ds []time.Duration, q int) float64 {
	slices.Sort(ds)
	return float64(ds[(len(ds)-1)*q/100].Microseconds()) / 1000
}

// throughput resends conversation id's events (want of them plus the
// state snapshot) over each way in rounds, interleaved, and returns the
// median round's messages per second of each.
func throughput(b *testing.B, direct, proxied benchTarget, id string, want, rounds int) (dm, pm float64) {
	round := func(t benchTarget) float64 {
		c := t.socket(b, "/sockets/events/"+id+"?resend_mode=all")
		defer c.Close()
		t0 := time.Now()
		got := 0
		for got < want+1 {
			if _, _, err := c.ReadMessage(); err != nil {
				b.Fatalf("after %d messages: %v", got, err)
			}
			got++
		}
		return float64(got) / time.Since(t0).Seconds()
	}
	var d, p []float64
	for range rounds {
		d = append(d, round(direct))
		p = append(p, round(proxied))
	}
	slices.Sort(d)
	slices.Sort(p)
	return d[len(d)/2], p[len(p)/2]
}

// socketMemory opens n idle event sockets each way (spread over convs,
// under the emulator's per-conversation limit) and returns the heap and
// stacks in use per direct socket, and what a proxied one costs beyond a
// direct one (the proxy's two connections and goroutines).
func socketMemory(b *testing.B, direct, proxied benchTarget, convs []string, n int) (directKiB, proxyKiB float64) {
	inUse := func() float64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapInuse + m.StackInuse)
	}
	open := func(t benchTarget) []*websocket.Conn {
		var cs []*websocket.Conn
		for i := range n {
			c := t.socket(b, "/sockets/events/"+convs[i%len(convs)])
			c.ReadMessage() // the state snapshot: the socket is subscribed
			cs = append(cs, c)
		}
		return cs
	}
	closeAll := func(cs []*websocket.Conn) {
		for _, c := range cs {
			c.Close()
		}
	}
	m0 := inUse()
	ds := open(direct)
	m1 := inUse()
	closeAll(ds)
	time.Sleep(200 * time.Millisecond)
	m2 := inUse()
	ps := open(proxied)
	m3 := inUse()
	closeAll(ps)
	perDirect := (m1 - m0) / float64(n)
	perProxied := (m3 - m2) / float64(n)
	return perDirect / 1024, (perProxied - perDirect) / 1024
}
