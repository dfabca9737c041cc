package agentproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
)

// fixture is a proxy in front of one upstream server standing for a
// provider's proxy and a box's agent-server, whose endpoint (token) the
// test can rotate.
type fixture struct {
	t        *testing.T
	upstream *httptest.Server
	front    *httptest.Server
	proxy    *Proxy

	mu       sync.Mutex
	token    string // the provider token the upstream accepts now
	resolved atomic.Int64
	counts   map[string]int
}

const boxKey = "box-key-0123456789"

func newFixture(t *testing.T, upstream http.Handler, cfg Config) *fixture {
	t.Helper()
	f := &fixture{t: t, token: "tok-1-abcdefgh", counts: map[string]int{}}
	f.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Provider-Token") != f.currentToken() {
			http.Error(w, `{"message":"stale token"}`, http.StatusUnauthorized)
			return
		}
		if r.Header.Get("X-Session-API-Key") != boxKey {
			http.Error(w, `{"detail":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		upstream.ServeHTTP(w, r)
	}))
	t.Cleanup(f.upstream.Close)
	cfg.Target = func(ctx context.Context, owner, id string, fresh bool) (core.AgentAccess, error) {
		if owner != "alice" || id != "ws_1" {
			return core.AgentAccess{}, core.Errorf(core.KindNotFound, "workspace %q not found", id)
		}
		f.resolved.Add(1)
		tok := "tok-1-abcdefgh"
		if fresh {
			tok = f.currentToken()
		}
		return core.AgentAccess{Endpoint: core.Endpoint{URL: f.upstream.URL + "/box/", Headers: map[string]string{"X-Provider-Token": tok}}, Key: boxKey}, nil
	}
	cfg.Transport = http.DefaultTransport
	cfg.DialContext = (&net.Dialer{}).DialContext
	cfg.WriteError = func(w http.ResponseWriter, r *http.Request, err error) {
		status := http.StatusInternalServerError
		switch {
		case core.IsKind(err, core.KindNotFound):
			status = 404
		case core.IsKind(err, core.KindInvalid):
			status = 400
		case core.IsKind(err, core.KindRateLimited):
			status = 429
		case core.IsKind(err, core.KindUnavailable):
			status = 503
		}
		if _, ok := err.(*BodyTooLargeError); ok {
			status = 413
		}
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
	}
	cfg.OwnCookies = []string{"companion_session"}
	cfg.OwnSubprotocol = func(p string) bool { return strings.HasPrefix(p, "companion.") }
	cfg.AnswerSubprotocol = "companion.v1"
	cfg.Counts = func(owner, id string, n int) {
		f.mu.Lock()
		f.counts[id] = n
		f.mu.Unlock()
	}
	f.proxy = New(cfg)
	f.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/w/"), "/agent")
		f.proxy.Serve(w, r, "alice", id, rest)
	}))
	t.Cleanup(f.front.Close)
	return f
}

func (f *fixture) currentToken() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.token
}

func (f *fixture) rotate(tok string) {
	f.mu.Lock()
	f.token = tok
	f.mu.Unlock()
}

func (f *fixture) do(method, path, body string, hdr http.Header) (*http.Response, string) {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.front.URL+"/w/ws_1/agent"+path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// echo answers what it was asked, headers included.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	json.NewEncoder(w).Encode(map[string]any{"path": r.URL.Path, "query": r.URL.RawQuery, "body": string(b),
		"authorization": r.Header.Get("Authorization"), "cookie": r.Header.Get("Cookie"), "host": r.Host,
		"forwarded": r.Header.Get("X-Forwarded-For")})
})

// TestForwardsWithTheBoxsCredentialsOnly: the request reaches the
// agent-server below its root with the provider's header and the box's
// key; the caller's Authorization, key and companion's cookie are not
// passed on (another cookie is); no X-Forwarded-For leaks the caller.
func TestForwardsWithTheBoxsCredentialsOnly(t *testing.T) {
	f := newFixture(t, echo, Config{})
	resp, body := f.do("POST", "/api/conversations?limit=3", `{"a":1}`, http.Header{
		"Authorization":     {"Bearer launch-token"},
		"X-Session-API-Key": {"callers-guess"},
		"Cookie":            {"companion_session=s3cret; theme=dark"},
	})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var got map[string]string
	json.Unmarshal([]byte(body), &got)
	if got["path"] != "/box/api/conversations" || got["query"] != "limit=3" || got["body"] != `{"a":1}` {
		t.Errorf("forwarded as %+v", got)
	}
	if got["authorization"] != "" || strings.Contains(got["cookie"], "s3cret") || got["cookie"] != "theme=dark" || got["forwarded"] != "" {
		t.Errorf("the caller's credentials went on: %+v", got)
	}
	if !strings.HasPrefix(got["host"], "127.0.0.1:") {
		t.Errorf("host %q", got["host"])
	}
}

// TestRefusesPathsThatClimbOut: ".." and "." segments, escaped or not,
// and backslashes never reach the upstream.
func TestRefusesPathsThatClimbOut(t *testing.T) {
	var reached atomic.Int64
	f := newFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }), Config{})
	for _, p := range []string{"/%2e%2e/x", "/a/%2E%2E/%2e%2e/b", "/./x", "/a\\..\\b", "/a/%2e/b"} {
		req, _ := http.NewRequest("GET", f.front.URL+"/w/ws_1/agent"+p, nil)
		req.URL.RawPath = "/w/ws_1/agent" + p
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", p, resp.StatusCode)
		}
	}
	if reached.Load() != 0 {
		t.Errorf("%d refused paths reached the upstream", reached.Load())
	}
}

// TestRotatedEndpointIsResolvedAgainOnce: after the provider rotates its
// token, a request (with a body) meets 401, is resolved afresh and sent
// again, transparently; the cache makes later requests cheap.
func TestRotatedEndpointIsResolvedAgainOnce(t *testing.T) {
	f := newFixture(t, echo, Config{})
	f.rotate("tok-2-abcdefgh")
	resp, body := f.do("POST", "/api/x", `{"kept":true}`, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `{\"kept\":true}`) {
		t.Fatalf("after a rotation: %d %s", resp.StatusCode, body)
	}
	// A refusal that is not a rotation is passed on as it is.
	refuse := newFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"detail":"Not Found"}`, http.StatusNotFound)
	}), Config{})
	resp, body = refuse.do("GET", "/api/conversations/nope", "", nil)
	if resp.StatusCode != 404 || !strings.Contains(body, "Not Found") || refuse.resolved.Load() != 2 {
		t.Errorf("an agent-server's own 404: %d %s after %d resolutions", resp.StatusCode, body, refuse.resolved.Load())
	}
}

// TestAnswersCarryNoSecret: a header of the answer that names the box's
// key or the provider's token is dropped; a redirect to the box becomes
// one to the proxy, one elsewhere is dropped.
func TestAnswersCarryNoSecret(t *testing.T) {
	var f *fixture
	f = newFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "provider-auth="+f.currentToken())
		w.Header().Set("X-Echo-Key", "key="+boxKey)
		w.Header().Set("X-Fine", "ok")
		switch r.URL.Path {
		case "/box/redirect-in":
			http.Redirect(w, r, "/box/api/there?x=1", http.StatusFound)
		case "/box/redirect-out":
			http.Redirect(w, r, "https://elsewhere.example/x", http.StatusFound)
		}
	}), Config{})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(p string) *http.Response {
		resp, err := client.Get(f.front.URL + "/w/ws_1/agent" + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := get("/plain")
	if resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("X-Echo-Key") != "" || resp.Header.Get("X-Fine") != "ok" {
		t.Errorf("answer headers: %v", resp.Header)
	}
	if loc := get("/redirect-in").Header.Get("Location"); loc != "/w/ws_1/agent/api/there?x=1" {
		t.Errorf("a redirect into the box: Location %q", loc)
	}
	if loc := get("/redirect-out").Header.Get("Location"); loc != "" {
		t.Errorf("a redirect out of the box: Location %q", loc)
	}
}

// TestLimits: an owner's open connections and a body's size are bounded,
// and the counts say what is open.
func TestLimits(t *testing.T) {
	hold := make(chan struct{})
	f := newFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/box/hold" {
			<-hold
		}
		io.Copy(io.Discard, r.Body)
	}), Config{MaxConnsPerOwner: 2, MaxBody: 1 << 20})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { f.do("GET", "/hold", "", nil) })
	}
	waitFor(t, func() bool { return f.proxy.Connections("ws_1") == 2 })
	resp, body := f.do("GET", "/other", "", nil)
	if resp.StatusCode != 429 || !strings.Contains(body, "2 open agent connections") {
		t.Errorf("a third connection: %d %s", resp.StatusCode, body)
	}
	close(hold)
	wg.Wait()
	waitFor(t, func() bool { return f.proxy.Connections("ws_1") == 0 })
	f.mu.Lock()
	last := f.counts["ws_1"]
	f.mu.Unlock()
	if last != 0 {
		t.Errorf("the last count reported is %d", last)
	}
	resp, _ = f.do("POST", "/upload", strings.Repeat("x", 2<<20), nil)
	if resp.StatusCode != 413 {
		t.Errorf("a body over the limit: %d", resp.StatusCode)
	}
	resp, _ = f.do("POST", "/upload", strings.Repeat("x", 512<<10), nil)
	if resp.StatusCode != 200 {
		t.Errorf("a body within the limit: %d", resp.StatusCode)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not reached")
}

// wsUpstream is a WebSocket agent-server stand-in: it echoes text
// messages, says "bye" and closes with 4004 when asked, and dies
// without a close on "die".
func wsUpstream(t *testing.T, chosen string) http.Handler {
	up := websocket.Upgrader{}
	if chosen != "" {
		up.Subprotocols = []string{chosen}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Sec-WebSocket-Protocol"), "companion.") {
			http.Error(w, "companion's subprotocol reached the box", http.StatusBadRequest)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			typ, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			switch string(b) {
			case "close":
				c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4004, "Conversation not found"), time.Now().Add(time.Second))
				return
			case "die":
				c.UnderlyingConn().Close()
				return
			}
			c.WriteMessage(typ, b)
		}
	})
}

func (f *fixture) dial(t *testing.T, protocols ...string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: protocols}
	c, resp, err := d.Dial(strings.Replace(f.front.URL, "http", "ws", 1)+"/w/ws_1/agent/sockets/events/x", nil)
	if err != nil {
		body := ""
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			body = fmt.Sprintf("%d %s", resp.StatusCode, b)
		}
		t.Fatalf("dial: %v %s", err, body)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestWebSocketRelays: a socket is relayed both ways (a 3 MiB message
// too), with the subprotocol the agent-server chose and never companion's
// bearer entry; the agent-server's close code reaches the caller; a box
// that dies mid-stream ends the caller's socket with CloseAgentGone; Close
// ends sockets with 1001.
func TestWebSocketRelays(t *testing.T) {
	f := newFixture(t, wsUpstream(t, "agent.v1"), Config{})
	c := f.dial(t, "agent.v1", "companion.bearer.secret")
	if c.Subprotocol() != "agent.v1" {
		t.Errorf("subprotocol %q", c.Subprotocol())
	}
	big := strings.Repeat("0123456789abcdef", 3<<16)
	for _, m := range []string{"hello", big} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.ReadMessage()
		if err != nil || string(got) != m {
			t.Fatalf("echo of %d bytes: %d bytes, %v", len(m), len(got), err)
		}
	}
	if n := f.proxy.Connections("ws_1"); n != 1 {
		t.Errorf("%d connections counted", n)
	}
	c.WriteMessage(websocket.TextMessage, []byte("close"))
	if code := closeCode(c); code != 4004 {
		t.Errorf("the agent-server's close: %d", code)
	}

	// An agent-server that selects no subprotocol: a caller that offered
	// companion's (as a browser must, beside its bearer entry) gets it
	// answered, and never its bearer entry.
	plain := newFixture(t, wsUpstream(t, ""), Config{})
	if c := plain.dial(t, "companion.v1", "companion.bearer.secret"); c.Subprotocol() != "companion.v1" {
		t.Errorf("with no subprotocol upstream: %q selected", c.Subprotocol())
	}
	if c := plain.dial(t); c.Subprotocol() != "" {
		t.Errorf("a caller that offered none got %q", c.Subprotocol())
	}

	c = f.dial(t, "agent.v1")
	c.WriteMessage(websocket.TextMessage, []byte("die"))
	if code := closeCode(c); code != CloseAgentGone {
		t.Errorf("a box that died: close %d, want %d", code, CloseAgentGone)
	}

	c = f.dial(t, "agent.v1")
	go f.proxy.Close()
	if code := closeCode(c); code != websocket.CloseGoingAway {
		t.Errorf("companion stopping: close %d", code)
	}
	waitFor(t, func() bool { return f.proxy.Connections("ws_1") == 0 })
}

func closeCode(c *websocket.Conn) int {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := c.ReadMessage()
		if ce, ok := err.(*websocket.CloseError); ok {
			return ce.Code
		}
		if err != nil {
			return -1
		}
	}
}

// TestStreamsWithoutBuffering: an answer the agent-server sends in
// flushed pieces (server-sent events) reaches the caller piece by piece,
// before the agent-server has finished it.
func TestStreamsWithoutBuffering(t *testing.T) {
	next := make(chan struct{})
	f := newFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-next
		fmt.Fprint(w, "data: second\n\n")
	}), Config{})
	resp, err := http.Get(f.front.URL + "/w/ws_1/agent/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != "data: first\n\n" {
		t.Fatalf("the first piece: %q %v", buf[:n], err)
	}
	close(next)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "data: second\n\n" {
		t.Errorf("the rest: %q", rest)
	}
}
