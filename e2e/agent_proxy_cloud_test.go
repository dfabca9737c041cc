package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/internal/testsupport"
)

// agentSocket opens a WebSocket through companion's agent proxy with hdr
// (the caller's credential) and protocols; it returns the connection, or
// the handshake's status when refused.
func agentSocket(t *testing.T, base, id, path string, hdr http.Header, protocols ...string) (*websocket.Conn, int) {
	t.Helper()
	url := strings.Replace(base, "http://", "ws://", 1) + "/v1/workspaces/" + id + "/agent" + path
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	d := websocket.Dialer{Subprotocols: protocols}
	c, resp, err := d.DialContext(ctx, url, hdr)
	contract.CheckHandshake(url, hdr, resp)
	if err != nil {
		if resp != nil {
			return nil, resp.StatusCode
		}
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, 101
}

// readUntil reads text frames until one contains want, keeping them all.
func readUntil(t *testing.T, c *websocket.Conn, want string, frames *[]string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for a frame with %q: %v (got %d frames)", want, err, len(*frames))
		}
		*frames = append(*frames, string(b))
		if strings.Contains(string(b), want) {
			return
		}
	}
}

func TestAgentProxyDaytona(t *testing.T)      { testAgentProxyCloud(t, "daytona") }
func TestAgentProxyE2B(t *testing.T)          { testAgentProxyCloud(t, "e2b") }
func TestAgentProxyDigitalOcean(t *testing.T) { testAgentProxyCloud(t, "digitalocean") }

// testAgentProxyCloud: on a provider's emulator with a real agent-server
// process behind its proxy, through the companion binary, a front end
// with only the launch token lists conversations, starts one, and gets
// its events over the proxied WebSocket (the bearer as a subprotocol
// entry, as a browser must send it); after a pause, connect wakes the box
// (and the endpoint the provider rotated is followed) and the agent
// answers again. No answer, frame or log line carries the box's key or a
// provider token.
func testAgentProxyCloud(t *testing.T, provider string) {
	f := newCloudFarm(t, provider)
	p := start(t, options{dataDir: t.TempDir()})
	acct := f.account(p)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "proxied " + provider}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", time.Minute).BoxID
	var seen []string
	keep := func(h http.Header, raw []byte) {
		b, _ := json.Marshal(h)
		seen = append(seen, string(b), string(raw))
	}

	var c connectResult
	p.must(200, "POST", "/v1/workspaces/"+id+"/connect", nil, &c)
	code, h, raw := p.agentReq("POST", id, "/api/conversations", `{"agent":{"llm":{"model":"m"}},"title":"via `+provider+`"}`, nil)
	keep(h, raw)
	if code != 201 {
		t.Fatalf("start a conversation through companion: %d %s", code, raw)
	}
	var conv struct{ ID string }
	json.Unmarshal(raw, &conv)
	code, h, raw = p.agentReq("GET", id, "/api/conversations/search", "", nil)
	keep(h, raw)
	if code != 200 || !strings.Contains(string(raw), "via "+provider) {
		t.Fatalf("search through companion: %d %s", code, raw)
	}

	ws, status := agentSocket(t, p.ready.URL, id, "/sockets/events/"+conv.ID+"?resend_mode=all", nil, "companion.bearer."+p.ready.Token)
	if ws == nil {
		t.Fatalf("events socket through companion: handshake %d", status)
	}
	code, h, raw = p.agentReq("POST", id, "/api/conversations/"+conv.ID+"/events",
		`{"role":"user","content":[{"type":"text","text":"hello through companion"}]}`, nil)
	keep(h, raw)
	if code != 200 {
		t.Fatalf("send a message: %d %s", code, raw)
	}
	var frames []string
	readUntil(t, ws, "hello through companion", &frames)
	ws.Close()

	if provider == "daytona" {
		// The provider rotates the preview token behind companion's back
		// (a stop and start at Daytona): the next request meets the stale
		// token, and companion resolves the endpoint again and resends it.
		for _, verb := range []string{"stop", "start"} {
			req, _ := http.NewRequest("POST", f.srv.URL+"/api/sandbox/"+box+"/"+verb, nil)
			req.Header.Set("Authorization", "Bearer "+cloudToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s the sandbox at the emulator: %v %v", verb, resp, err)
			}
			resp.Body.Close()
		}
		p.waitState(id, "running", time.Minute)
		code, h, raw = p.agentReq("GET", id, "/api/conversations/search", "", nil)
		keep(h, raw)
		if code != 200 || !strings.Contains(p.stderr.String(), "agent-server endpoint rotated") {
			t.Fatalf("a request after the token rotated: %d %s", code, raw)
		}
	}

	oldURL, _, _ := f.endpoint(box)
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", time.Minute)
	p.must(200, "POST", "/v1/workspaces/"+id+"/connect", nil, &c)
	if !c.Connect.Woke {
		t.Errorf("connect to the paused box: %+v", c.Connect)
	}
	newURL, _, _ := f.endpoint(c.Connect.Workspace.BoxID)
	if provider == "digitalocean" && newURL == oldURL {
		t.Errorf("the ingress did not change across the resume (%s): the rotation is not exercised", newURL)
	}
	code, h, raw = p.agentReq("GET", id, "/api/conversations/search", "", nil)
	keep(h, raw)
	if code != 200 || !strings.Contains(string(raw), "via "+provider) {
		t.Fatalf("search after the wake: %d %s", code, raw)
	}

	_, hdr, _ := f.endpoint(c.Connect.Workspace.BoxID)
	secrets := []string{cloudToken}
	if key, _ := f.boxKey(box); key != "" {
		secrets = append(secrets, key)
	}
	for _, vs := range hdr {
		for _, v := range vs {
			if v = strings.TrimPrefix(v, "Bearer "); len(v) >= 8 {
				secrets = append(secrets, v)
			}
		}
	}
	all := strings.Join(append(append(seen, frames...), p.stderr.String()), "\n")
	for _, s := range secrets {
		if strings.Contains(all, s) {
			t.Fatalf("a secret (%d characters) appears in an answer, a frame or the log", len(s))
		}
	}
}

// TestAgentProxyIsolatesUsers: in serve mode with sign-in, bob is refused
// on alice's agent with 404, over HTTP and over WebSocket, while alice
// reaches it with her session cookie.
func TestAgentProxyIsolatesUsers(t *testing.T) {
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	addUser(t, data, "bob", "bob-password-22")
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--docker-image", boxImage(t), "--docker-scope", dockerScope(t)}})
	alice, bob := newWebClient(t, p.ready.URL), newWebClient(t, p.ready.URL)
	alice.login("alice", "alice-password-1")
	bob.login("bob", "bob-password-22")
	var ws struct{ Workspace workspace }
	alice.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "alice's"}, &ws)
	id := ws.Workspace.ID
	deadline := time.Now().Add(2 * time.Minute)
	for ws.Workspace.State != "running" && time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		alice.must(200, "GET", "/v1/workspaces/"+id, nil, &ws)
	}
	alice.must(200, "POST", "/v1/workspaces/"+id+"/connect", nil, nil)
	alice.must(200, "GET", "/v1/workspaces/"+id+"/agent/api/conversations/search", nil, nil)
	if code, raw, _ := bob.do("GET", "/v1/workspaces/"+id+"/agent/api/conversations/search", nil, nil); code != 404 {
		t.Errorf("bob on alice's agent over HTTP: %d %s", code, raw)
	}
	if code, raw, _ := bob.do("POST", "/v1/workspaces/"+id+"/connect", nil, nil); code != 404 {
		t.Errorf("bob connecting to alice's workspace: %d %s", code, raw)
	}
	hdr := func(c *webClient) http.Header {
		return http.Header{"Cookie": {c.cookieHeader()}, "Origin": {p.ready.URL}}
	}
	if c, status := agentSocket(t, p.ready.URL, id, "/sockets/bash-events", hdr(bob)); c != nil || status != 404 {
		t.Errorf("bob's socket to alice's agent: %d", status)
	}
	if c, status := agentSocket(t, p.ready.URL, id, "/sockets/bash-events", hdr(alice)); c == nil {
		t.Errorf("alice's socket to her agent: %d", status)
	}
}

// TestAgentSocketEndsWhenTheBoxDies: a proxied socket is open when the
// Docker box is killed (SIGKILL, as a crash or an out-of-memory kill);
// the caller's socket ends with 4013 and a reason, not a hang.
func TestAgentSocketEndsWhenTheBoxDies(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", boxImage(t), "--docker-scope", dockerScope(t)}})
	ws := p.createRunning("doomed")["doomed"]
	p.must(200, "POST", "/v1/workspaces/"+ws.ID+"/connect", nil, nil)
	c, status := agentSocket(t, p.ready.URL, ws.ID, "/sockets/bash-events", http.Header{"Authorization": {"Bearer " + p.ready.Token}})
	if c == nil {
		t.Fatalf("socket: %d", status)
	}
	if _, err := dockerCLI(t).ContainerKill(context.Background(), ws.BoxID, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(70 * time.Second))
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		ce, ok := err.(*websocket.CloseError)
		if !ok || ce.Code != 4013 || !strings.Contains(ce.Text, "went away") {
			t.Fatalf("the caller's socket ended with %v, want close 4013 saying the agent-server went away", err)
		}
		return
	}
}

// TestConnectedBoxesAreReadOnlyWhileConnected: rule 2 of the design. An
// E2B box (its provider's list reports no activity) is never read inside
// while nobody is connected; while a person holds a socket to its agent
// through companion, its /server_info is read and the workspace's last
// activity set from it; once the socket closes, the reads stop.
func TestConnectedBoxesAreReadOnlyWhileConnected(t *testing.T) {
	f := newCloudFarm(t, "e2b")
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--connected-read-interval", "300ms"}})
	acct := f.account(p)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "read while connected"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", time.Minute).BoxID
	reads := func() int {
		n := 0
		for _, l := range f.requests() {
			if strings.Contains(l, box) && strings.Contains(l, " /server_info ") {
				n++
			}
		}
		return n
	}
	time.Sleep(1500 * time.Millisecond) // five read intervals with nobody connected
	if n := reads(); n != 0 {
		t.Fatalf("a box nobody is connected to was read %d times", n)
	}
	c, status := agentSocket(t, p.ready.URL, id, "/sockets/bash-events", http.Header{"Authorization": {"Bearer " + p.ready.Token}})
	if c == nil {
		t.Fatalf("socket: %d", status)
	}
	testsupport.Poll(t, 20*time.Second, func() error {
		ws := p.waitState(id, "running", time.Second)
		if ws.LastActivityAt == nil || reads() == 0 {
			return fmt.Errorf("last activity %v after %d reads", ws.LastActivityAt, reads())
		}
		return nil
	})
	c.Close()
	time.Sleep(700 * time.Millisecond) // the proxy counts the close
	before := reads()
	time.Sleep(1500 * time.Millisecond)
	if after := reads(); after != before {
		t.Errorf("the box was read %d more times after the person left", after-before)
	}
}
