package emutest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// AgentStandIn stands in for the agent-server behind a box proxy in the
// emulators' proxy tests:
//
//	GET /server_info       {"title": box id, "version": "stand-in"}
//	GET /stream            "first\n", flushed, then "second\n" once Release runs
//	GET /sockets/events/…  a WebSocket upgrade that echoes every message
//
// It remembers the headers of each box's last request.
type AgentStandIn struct {
	mu      sync.Mutex
	last    map[string]http.Header
	release chan struct{}
	once    sync.Once
}

// NewAgentStandIn returns a stand-in with nothing seen yet.
func NewAgentStandIn() *AgentStandIn {
	return &AgentStandIn{last: map[string]http.Header{}, release: make(chan struct{})}
}

// Version is what the stand-in's /server_info reports.
const Version = "stand-in"

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// For is the handler of box id, the shape of the emulators' AgentServer
// option.
func (a *AgentStandIn) For(id string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.last[id] = r.Header.Clone()
		a.mu.Unlock()
		switch {
		case r.URL.Path == "/server_info":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"title": id, "version": Version, "uptime": 1, "idle_time": 0})
		case r.URL.Path == "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "first\n")
			w.(http.Flusher).Flush() // a wrapper without Flush fails here
			select {
			case <-a.release:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "second\n")
		case strings.HasPrefix(r.URL.Path, "/sockets/events/"):
			c, err := upgrader.Upgrade(w, r, nil) // a wrapper without Hijack fails here
			if err != nil {
				return
			}
			defer c.Close()
			for {
				kind, msg, err := c.ReadMessage()
				if err != nil {
					return
				}
				if err := c.WriteMessage(kind, msg); err != nil {
					return
				}
			}
		default:
			http.NotFound(w, r)
		}
	})
}

// Last returns the headers of box id's last request (nil if none).
func (a *AgentStandIn) Last(id string) http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last[id]
}

// Release lets every /stream request finish.
func (a *AgentStandIn) Release() { a.once.Do(func() { close(a.release) }) }

// Via sends a request to the server at srvURL with Host set to host (a
// box proxy's name such as 8000-{id}.localhost:PORT, which need not
// resolve). hdr are key/value pairs.
func Via(t *testing.T, srvURL, host, method, path string, hdr ...string) Response {
	t.Helper()
	req, err := http.NewRequest(method, srvURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s via %s: %v", method, path, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{resp.StatusCode, resp.Header, b}
}

// Endpoint splits a box URL (http://host:port) into the Host to send and
// checks it names the server at srvURL's port.
func Endpoint(t *testing.T, srvURL, boxURL string) string {
	t.Helper()
	b, err := url.Parse(boxURL)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := url.Parse(srvURL)
	if b.Port() != s.Port() {
		t.Fatalf("box URL %s is not on the server's port %s", boxURL, s.Port())
	}
	return b.Host
}

// CheckWebSocket dials a WebSocket to path through the server at srvURL
// addressed to host, with hdr on the handshake, and checks a message comes
// back echoed: the upgrade passed through the proxy to the stand-in.
func CheckWebSocket(t *testing.T, srvURL, host, path string, hdr http.Header) {
	t.Helper()
	addr := strings.TrimPrefix(srvURL, "http://")
	d := websocket.Dialer{
		HandshakeTimeout: 5 * time.Second,
		NetDialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	c, resp, err := d.Dial("ws://"+host+path, hdr)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("WebSocket through %s: %v (status %d)", host, err, status)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"auth"}`)); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.ReadMessage()
	if err != nil || string(msg) != `{"type":"auth"}` {
		t.Fatalf("echo through %s: %q, %v", host, msg, err)
	}
}

// CheckStreams sends GET /stream through the server at srvURL addressed
// to host and checks the first line arrives before the stand-in is
// released: nothing on the way buffers the answer. It releases a.
func CheckStreams(t *testing.T, a *AgentStandIn, srvURL, host string, hdr ...string) {
	t.Helper()
	defer a.Release()
	req, err := http.NewRequest("GET", srvURL+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("stream via %s: %v", host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream via %s: %d %s", host, resp.StatusCode, b)
	}
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("first line through %s before release: %q, %v (the answer was buffered)", host, line, err)
	}
	a.Release()
	if line, err := rd.ReadString('\n'); err != nil || line != "second\n" {
		t.Fatalf("second line through %s: %q, %v", host, line, err)
	}
}
