package apicontract

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// documented and undocumented are stream messages: the second has a field
// StreamMessage does not allow.
const (
	documented   = `{"type":"remove","rev":3,"server_time":"2026-01-01T00:00:00Z","id":"ws_1"}`
	undocumented = `{"type":"remove","rev":4,"server_time":"2026-01-01T00:00:00Z","id":"ws_1","why":"x"}`
)

// wsCompanion stands in for companion's WebSocket routes. /v1/ws and the
// agent route accept a bearer token (else 401 with the error body), choose
// companion.v1, ping the client, send documented then undocumented, and
// then echo: a text "close CODE REASON" is answered with that close
// frame. Whatever close frame the client sends is reported on a channel
// and answered with 4001 "answer to CODE REASON"; so is each pong.
type wsCompanion struct {
	srv    *httptest.Server
	closes chan string // "CODE REASON" of each close frame received
	pongs  chan string
	hosts  chan string // the Host header of each request
}

func newWSCompanion(t *testing.T) *wsCompanion { return newWSCompanionOn(t, nil) }

// newWSCompanionOn serves on ln (nil: a new loopback port).
func newWSCompanionOn(t *testing.T, ln net.Listener) *wsCompanion {
	t.Helper()
	wc := &wsCompanion{closes: make(chan string, 8), pongs: make(chan string, 8), hosts: make(chan string, 64)}
	up := websocket.Upgrader{Subprotocols: []string{"companion.v1"}}
	wc.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case wc.hosts <- r.Host:
		default:
		}
		if r.URL.Path == "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status":"ok","version":"1","uptime":3}`)
			return
		}
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", `Bearer realm="companion"`)
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"code":"unauthorized","message":"a valid token is required"}}`)
			return
		}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		conn.SetPongHandler(func(s string) error { wc.pongs <- s; return nil })
		conn.SetCloseHandler(func(code int, text string) error {
			// Answered with a close of its own making, so that a test can
			// tell companion's answer from one the relay made up.
			got := closeText(code, text)
			wc.closes <- got
			return conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "answer to "+got), time.Now().Add(5*time.Second))
		})
		conn.WriteControl(websocket.PingMessage, []byte("alive?"), time.Now().Add(5*time.Second))
		conn.WriteMessage(websocket.TextMessage, []byte(documented))
		conn.WriteMessage(websocket.TextMessage, []byte(undocumented))
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				return
			}
			if code, reason, ok := parseClose(string(data)); ok {
				conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(5*time.Second))
				continue
			}
			conn.WriteMessage(websocket.TextMessage, data)
		}
	}))
	if ln != nil {
		wc.srv.Listener.Close()
		wc.srv.Listener = ln
	}
	wc.srv.Start()
	t.Cleanup(wc.srv.Close)
	return wc
}

func closeText(code int, text string) string {
	return strings.TrimSpace(fmt.Sprintf("%d %s", code, text))
}

// parseClose reads "close CODE REASON".
func parseClose(s string) (int, string, bool) {
	rest, ok := strings.CutPrefix(s, "close ")
	if !ok {
		return 0, "", false
	}
	num, reason, _ := strings.Cut(rest, " ")
	code, err := strconv.Atoi(num)
	return code, reason, err == nil
}

// through is how a test client reaches the fake companion: through the
// browser proxy (CONNECT, as Chromium sends ws://) or through a front.
type through struct {
	name string
	dial func(t *testing.T, path string, header http.Header) (*websocket.Conn, *http.Response, error)
	get  func(t *testing.T, path string) *http.Response
}

func viaBrowserProxy(c *Checker, base string) through {
	return through{
		name: "browser proxy",
		dial: func(t *testing.T, path string, header http.Header) (*websocket.Conn, *http.Response, error) {
			bp, err := c.NewBrowserProxy()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { bp.Close() })
			proxy, _ := url.Parse("http://" + bp.Addr)
			d := websocket.Dialer{Proxy: http.ProxyURL(proxy), Subprotocols: []string{"companion.v1"}}
			return d.Dial(strings.Replace(base, "http://", "ws://", 1)+path, header)
		},
	}
}

func viaFront(c *Checker, base string) through {
	var front *Front
	frontURL := func(t *testing.T) string {
		if front == nil {
			var err error
			if front, err = c.NewFront(base); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { front.Close() })
		}
		return front.URL
	}
	return through{
		name: "front",
		dial: func(t *testing.T, path string, header http.Header) (*websocket.Conn, *http.Response, error) {
			d := websocket.Dialer{Subprotocols: []string{"companion.v1"}}
			return d.Dial(strings.Replace(frontURL(t), "http://", "ws://", 1)+path, header)
		},
		get: func(t *testing.T, path string) *http.Response {
			resp, err := http.Get(frontURL(t) + path)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		},
	}
}

var bearer = http.Header{"Authorization": {"Bearer tok"}}

// TestRelayChecksStream: companion's stream messages relayed through the
// browser proxy's CONNECT tunnel or a front are checked (the undocumented
// field is a failure), the client gets them all and the subprotocol
// companion chose, and pings reach the far end and are answered.
func TestRelayChecksStream(t *testing.T) {
	for _, mk := range []func(*Checker, string) through{viaBrowserProxy, viaFront} {
		c := load(t)
		wc := newWSCompanion(t)
		c.Register(wc.srv.URL)
		via := mk(c, wc.srv.URL)
		t.Run(via.name, func(t *testing.T) {
			conn, _, err := via.dial(t, "/v1/ws", bearer)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The client's own answer to the ping, so that one the relay
			// made up would show.
			conn.SetPingHandler(func(s string) error {
				return conn.WriteControl(websocket.PongMessage, []byte("client: "+s), time.Now().Add(5*time.Second))
			})
			if conn.Subprotocol() != "companion.v1" {
				t.Errorf("subprotocol %q, want companion.v1", conn.Subprotocol())
			}
			for _, want := range []string{documented, undocumented} {
				_, got, err := conn.ReadMessage() // also answers companion's ping
				if err != nil || string(got) != want {
					t.Fatalf("got %q, %v; want %s", got, err, want)
				}
			}
			if p := <-wc.pongs; p != "client: alive?" {
				t.Errorf("companion's ping was answered %q", p)
			}
			f := c.Forget(wc.srv.URL)
			if len(f) != 1 || !strings.Contains(f[0], "StreamMessage") || !strings.Contains(f[0], "why") {
				t.Errorf("failures %q, want one: the undocumented field of a stream message", f)
			}
			if h := <-wc.hosts; h != wc.srv.Listener.Addr().String() {
				t.Errorf("companion was sent Host %q, want its own address", h)
			}
		})
	}
}

// TestRelayAgentNotStream: a WebSocket on the agent route carries the
// agent's protocol, which is not StreamMessage and is not checked as one.
func TestRelayAgentNotStream(t *testing.T) {
	for _, mk := range []func(*Checker, string) through{viaBrowserProxy, viaFront} {
		c := load(t)
		wc := newWSCompanion(t)
		c.Register(wc.srv.URL)
		via := mk(c, wc.srv.URL)
		t.Run(via.name, func(t *testing.T) {
			conn, _, err := via.dial(t, "/v1/workspaces/ws_1/agent/sockets/events/abc", bearer)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.ReadMessage()
			conn.ReadMessage()
			if f := c.Forget(wc.srv.URL); len(f) > 0 {
				t.Errorf("the agent's messages were checked as stream messages: %q", f)
			}
		})
	}
}

// TestRelayRefusedHandshake: a handshake companion refuses reaches the
// client with companion's status and body, and is checked.
func TestRelayRefusedHandshake(t *testing.T) {
	for _, mk := range []func(*Checker, string) through{viaBrowserProxy, viaFront} {
		c := load(t)
		wc := newWSCompanion(t)
		c.Register(wc.srv.URL)
		via := mk(c, wc.srv.URL)
		t.Run(via.name, func(t *testing.T) {
			n := c.Checked()
			_, resp, err := via.dial(t, "/v1/ws", nil)
			if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil {
				t.Fatalf("dial without a token: %v, %v; want a refused handshake", err, resp)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `"unauthorized"`) ||
				resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("the client got %d %q %v, want companion's 401 with its body and WWW-Authenticate", resp.StatusCode, b, resp.Header)
			}
			if c.Checked() == n {
				t.Error("the refused handshake was not checked")
			}
			if f := c.Forget(wc.srv.URL); len(f) > 0 {
				t.Errorf("a documented refusal failed: %q", f)
			}
		})
	}
}

// TestRelayCloseCodes: close frames pass through both ways with their code
// and reason (the page and the client react to specific codes).
func TestRelayCloseCodes(t *testing.T) {
	for _, mk := range []func(*Checker, string) through{viaBrowserProxy, viaFront} {
		c := load(t)
		wc := newWSCompanion(t)
		c.Register(wc.srv.URL)
		via := mk(c, wc.srv.URL)
		t.Run(via.name, func(t *testing.T) {
			// companion closes: the client sees its code and reason.
			conn, _, err := via.dial(t, "/v1/workspaces/ws_1/agent/x", bearer)
			if err != nil {
				t.Fatal(err)
			}
			conn.ReadMessage()
			conn.ReadMessage()
			conn.WriteMessage(websocket.TextMessage, []byte("close 4012 signed out"))
			_, _, err = conn.ReadMessage()
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != 4012 || ce.Text != "signed out" {
				t.Errorf("companion's close reached the client as %v, want 4012 signed out", err)
			}
			if got := <-wc.closes; got != "4012" {
				t.Errorf("the client's answer (gorilla echoes the code) reached companion as %q", got)
			}
			conn.Close()

			// The client closes: companion sees its code and reason, and
			// its answer comes back.
			conn, _, err = via.dial(t, "/v1/workspaces/ws_1/agent/x", bearer)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.ReadMessage()
			conn.ReadMessage()
			conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "going home"), time.Now().Add(5*time.Second))
			if got := <-wc.closes; got != "4000 going home" {
				t.Errorf("the client's close reached companion as %q", got)
			}
			_, _, err = conn.ReadMessage()
			if !errors.As(err, &ce) || ce.Code != 4001 || ce.Text != "answer to 4000 going home" {
				t.Errorf("companion's answer to the close reached the client as %v, want 4001 answer to 4000 going home", err)
			}
		})
	}
}

// TestFrontChecksHTTP: plain requests through a front are checked as
// exchanges with the upstream, which is sent its own address as Host, and
// the client gets companion's answer.
func TestFrontChecksHTTP(t *testing.T) {
	c := load(t)
	wc := newWSCompanion(t)
	c.Register(wc.srv.URL)
	via := viaFront(c, wc.srv.URL)
	resp := via.get(t, "/healthz")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"uptime":3`) {
		t.Fatalf("through the front: %d %s", resp.StatusCode, b)
	}
	if h := <-wc.hosts; h != wc.srv.Listener.Addr().String() {
		t.Errorf("companion was sent Host %q, want its own address", h)
	}
	if f := c.Forget(wc.srv.URL); len(f) != 1 || !strings.Contains(f[0], "uptime") {
		t.Fatalf("the undocumented field through the front: failures %q, want one naming uptime", f)
	}
}

// TestFrontOutlivesRestart: the front targets an address, not a process:
// a companion started again on the same port is reached through it, and
// checked while registered.
func TestFrontOutlivesRestart(t *testing.T) {
	c := load(t)
	wc := newWSCompanion(t)
	addr := wc.srv.Listener.Addr().String()
	c.Register(wc.srv.URL)
	via := viaFront(c, wc.srv.URL)
	resp := via.get(t, "/healthz")
	resp.Body.Close()
	wc.srv.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	newWSCompanionOn(t, ln)
	conn, _, err := via.dial(t, "/v1/ws", bearer)
	if err != nil {
		t.Fatalf("the front after the restart: %v", err)
	}
	defer conn.Close()
	conn.ReadMessage()
	conn.ReadMessage()
	if f := c.Forget(wc.srv.URL); len(f) != 2 {
		t.Errorf("failures %q, want two (uptime before the restart, the stream's field after)", f)
	}
}
