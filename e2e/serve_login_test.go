package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
)

// These tests run companion serve with sign-in (--auth local, --auth
// proxy) and probe it the way an attacker would: each probe must be
// refused. docs/serve.md's security section lists them.

// addUser runs "companion users add" with the password on stdin.
func addUser(t *testing.T, data, name, password string, extra ...string) {
	t.Helper()
	cmd := exec.Command(companionBin, append([]string{"users", "add", "--data-dir", data, name}, extra...)...)
	cmd.Stdin = strings.NewReader(password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("users add %s: %v\n%s", name, err, out)
	}
}

// cli runs a companion command and returns its stdout.
func cli(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(companionBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("companion %v: %v\n%s%s", args, err, out.String(), errb.String())
	}
	return out.String()
}

// webClient is one person's HTTP client: a cookie jar (a browser), or a
// bearer token (a script), and optionally the headers a browser adds.
type webClient struct {
	t      *testing.T
	base   string // the ready URL, base path included
	hc     *http.Client
	bearer string
	header http.Header
}

func newWebClient(t *testing.T, base string) *webClient {
	jar, _ := cookiejar.New(nil)
	return &webClient{t: t, base: base, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}, header: http.Header{}}
}

func (c *webClient) do(method, path string, body any, out any) (int, []byte, http.Header) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw, resp.Header
}

// clientFrom is a webClient at base whose connections come from the
// loopback address src (any of 127.0.0.0/8 on Linux): one more client
// address without another machine.
func clientFrom(t *testing.T, src, base string) *webClient {
	c := newWebClient(t, base)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c.hc.Transport = contract.Transport(&http.Transport{DialContext: d.DialContext})
	return c
}

func (c *webClient) must(want int, method, path string, body, out any) []byte {
	c.t.Helper()
	got, raw, _ := c.do(method, path, body, out)
	if got != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, want, raw)
	}
	return raw
}

func (c *webClient) login(name, password string) {
	c.t.Helper()
	c.must(200, "POST", "/v1/login", map[string]string{"name": name, "password": password}, nil)
}

// cookieHeader is the Cookie header the jar sends to base.
func (c *webClient) cookieHeader() string {
	req, _ := http.NewRequest("GET", c.base+"/v1/me", nil)
	var parts []string
	for _, ck := range c.hc.Jar.Cookies(req.URL) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	return strings.Join(parts, "; ")
}

// dialWS opens the stream with the client's cookie and extra headers;
// it returns the handshake's status when refused.
func (c *webClient) dialWS(since int64, extra http.Header) (*stream, int) {
	c.t.Helper()
	url := strings.Replace(c.base, "http://", "ws://", 1) + "/v1/ws"
	if since >= 0 {
		url += fmt.Sprintf("?since=%d", since)
	}
	h := http.Header{}
	if ck := c.cookieHeader(); ck != "" {
		h.Set("Cookie", ck)
	}
	if c.bearer != "" {
		h.Set("Authorization", "Bearer "+c.bearer)
	}
	for k, v := range extra {
		h[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := websocket.Dialer{Subprotocols: []string{"companion.v1"}}
	conn, resp, err := d.DialContext(ctx, url, h)
	contract.CheckHandshake(url, h, resp)
	if err != nil {
		if resp != nil {
			return nil, resp.StatusCode
		}
		c.t.Fatalf("dial %s: %v", url, err)
	}
	return watch(c.t, conn), 101
}

// addDaytona adds a Daytona account (the emulator) for the client's user
// and creates a workspace on it; it returns the account and workspace ids.
func (c *webClient) addDaytona(apiURL, name string) (string, string) {
	c.t.Helper()
	return c.addDaytonaWith(apiURL, cloudToken, name)
}

// addDaytonaWith is addDaytona with the account's token.
func (c *webClient) addDaytonaWith(apiURL, token, name string) (string, string) {
	c.t.Helper()
	var acct struct{ Account struct{ ID string } }
	c.must(201, "POST", "/v1/accounts", map[string]any{"provider": "daytona", "label": name,
		"config": map[string]string{"api_url": apiURL}, "credentials": map[string]string{"token": token}}, &acct)
	var ws struct{ Workspace workspace }
	c.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct.Account.ID, "name": name}, &ws)
	return acct.Account.ID, ws.Workspace.ID
}

// TestServeLoginProbes starts serve --auth local under a base path and
// runs the probes of docs/serve.md's security section against it: forged and
// logged-out sessions, cross-site writes and WebSockets with a valid
// cookie, revoked tokens, user B reaching user A's things in every way,
// a non-admin installing a module, and password guessing.
func TestServeLoginProbes(t *testing.T) {
	dt := daytona.New(daytona.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
	api := httptest.NewServer(dt.Handler())
	t.Cleanup(func() { dt.Close(); api.Close() })
	apiURL := api.URL + "/api"

	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	addUser(t, data, "bob", "bob-password-22")
	if out := cli(t, "", "users", "list", "--data-dir", data); !regexpMatch(`alice\s+local\s+true`, out) || !regexpMatch(`bob\s+local\s+false`, out) {
		t.Fatalf("users list: the first user must be the only admin:\n%s", out)
	}
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--base-path", "/api/companion", "--docker-scope", "unused"}})
	if p.ready.Token != "" || !strings.HasSuffix(p.ready.URL, "/api/companion") {
		t.Fatalf("ready line %+v: want no launch token and the base path in the URL", p.ready)
	}
	root := strings.TrimSuffix(p.ready.URL, "/api/companion")

	// Routes live under the base path only.
	anon := newWebClient(t, p.ready.URL)
	anon.must(200, "GET", "/healthz", nil, nil)
	if code, _, _ := newWebClient(t, root).do("GET", "/healthz", nil, nil); code != 404 {
		t.Fatalf("GET /healthz outside the base path: %d, want 404", code)
	}
	anon.must(401, "GET", "/v1/workspaces", nil, nil)

	// Wrong password and unknown user: the same answer.
	_, wrongPw, _ := anon.do("POST", "/v1/login", map[string]string{"name": "alice", "password": "nope-nope-nope"}, nil)
	_, unknown, _ := anon.do("POST", "/v1/login", map[string]string{"name": "mallory", "password": "nope-nope-nope"}, nil)
	if !bytes.Equal(wrongPw, unknown) || !bytes.Contains(wrongPw, []byte(`"unauthorized"`)) {
		t.Fatalf("wrong password %s vs unknown user %s: want the same 401", wrongPw, unknown)
	}

	alice := newWebClient(t, p.ready.URL)
	_, _, hdr := alice.do("POST", "/v1/login", map[string]string{"name": "alice", "password": "alice-password-1"}, nil)
	sc := hdr.Get("Set-Cookie")
	for _, want := range []string{"companion_session_api_companion=cps_", "Path=/api/companion/", "HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(sc, want) {
			t.Fatalf("Set-Cookie %q lacks %q", sc, want)
		}
	}
	var me struct {
		User struct {
			Name  string
			Admin bool
		}
	}
	alice.must(200, "GET", "/v1/me", nil, &me)
	if me.User.Name != "alice" || !me.User.Admin {
		t.Fatalf("me: %+v", me)
	}
	bob := newWebClient(t, p.ready.URL)
	bob.login("bob", "bob-password-22")

	// Probe: a forged session cookie.
	forged := newWebClient(t, p.ready.URL)
	forged.header.Set("Cookie", "companion_session_api_companion=cps_"+strings.Repeat("A", 43))
	forged.must(401, "GET", "/v1/me", nil, nil)

	// Alice's things.
	aliceWS, _ := alice.dialWS(-1, nil)
	aliceWS.next(10 * time.Second)
	aliceAcct, aliceWsID := alice.addDaytona(apiURL, "alice-box")
	aliceWS.waitFor("alice's workspace running", 90*time.Second, upsertOf(aliceWsID, "running"))

	// Probes: bob lists, reads, changes and removes alice's things.
	bobWS, _ := bob.dialWS(-1, nil)
	snap := bobWS.next(10 * time.Second)
	if snap.Type != "snapshot" || len(snap.Workspaces) != 0 {
		t.Fatalf("bob's snapshot: %s", snap.Raw)
	}
	bobSince, _ := bob.dialWS(0, nil)
	var list struct{ Workspaces []workspace }
	bob.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 0 {
		t.Fatalf("bob lists alice's workspaces: %+v", list)
	}
	if raw := bob.must(200, "GET", "/v1/accounts", nil, nil); bytes.Contains(raw, []byte(aliceAcct)) {
		t.Fatalf("bob lists alice's account: %s", raw)
	}
	for _, probe := range []struct{ method, path string }{
		{"GET", "/v1/workspaces/" + aliceWsID},
		{"POST", "/v1/workspaces/" + aliceWsID + "/pause"},
		{"POST", "/v1/workspaces/" + aliceWsID + "/resume"},
		{"POST", "/v1/workspaces/" + aliceWsID + "/delete-preview"},
		{"POST", "/v1/workspaces/" + aliceWsID + "/delete"},
		{"PUT", "/v1/workspaces/" + aliceWsID + "/keep"},
		{"GET", "/v1/workspaces/" + aliceWsID + "/exports"},
		{"POST", "/v1/workspaces/" + aliceWsID + "/export"},
		{"GET", "/v1/workspaces/" + aliceWsID + "/agent"},
		{"GET", "/v1/accounts/" + aliceAcct},
		{"DELETE", "/v1/accounts/" + aliceAcct},
	} {
		var body any
		switch {
		case strings.HasSuffix(probe.path, "/keep"):
			body = map[string]bool{"keep": true}
		case strings.HasSuffix(probe.path, "/delete"):
			body = map[string]string{"token": "x"}
		case probe.method == "POST":
			body = map[string]any{}
		}
		if code, raw, _ := bob.do(probe.method, probe.path, body, nil); code != 404 {
			t.Errorf("bob %s %s: %d %s, want 404", probe.method, probe.path, code, raw)
		}
	}
	if raw := bob.must(200, "GET", "/v1/audit", nil, nil); bytes.Contains(raw, []byte(aliceWsID)) || bytes.Contains(raw, []byte(aliceAcct)) {
		t.Fatalf("bob's audit trail shows alice's actions: %s", raw)
	}
	var whoami meAnswer
	alice.must(200, "GET", "/v1/me", nil, &whoami)
	// The actor is named by display name and stable user id.
	if raw := alice.must(200, "GET", "/v1/audit", nil, nil); !bytes.Contains(raw, []byte(aliceAcct)) || whoami.User.ID == "" ||
		!bytes.Contains(raw, []byte("user:alice ("+whoami.User.ID+")")) {
		t.Fatalf("alice's audit trail lacks her own account or does not name her by name and id %q: %s", whoami.User.ID, raw)
	}
	// Alice's workspace is untouched and her changes never reach bob's
	// streams: bob's own later change arrives, alice's earlier one not.
	alice.must(202, "POST", "/v1/workspaces/"+aliceWsID+"/pause", map[string]any{}, nil)
	aliceWS.waitFor("alice's pause", 60*time.Second, upsertOf(aliceWsID, "paused"))
	_, bobWsID := bob.addDaytona(apiURL, "bob-box")
	for _, s := range []*stream{bobWS, bobSince} {
		s.waitFor("bob's own workspace", 60*time.Second, func(m wsMsg) bool {
			return (m.Type == "upsert" && m.Workspace != nil && m.Workspace.ID == bobWsID) ||
				(m.Type == "snapshot" && strings.Contains(string(m.Raw), bobWsID))
		})
		if seen := s.seen.String(); strings.Contains(seen, aliceWsID) || strings.Contains(seen, "alice-box") {
			t.Fatalf("bob's stream carried alice's workspace:\n%s", seen)
		}
	}

	// Probe: a non-admin installs (inspects) a module; the admin may.
	if code, raw, _ := bob.do("POST", "/v1/providers/inspect", map[string]any{}, nil); code != 403 {
		t.Fatalf("bob inspects a module: %d %s, want 403", code, raw)
	}
	if code, raw, _ := bob.do("POST", "/v1/providers?sha256="+strings.Repeat("0", 64), map[string]any{}, nil); code != 403 {
		t.Fatalf("bob installs a module: %d %s, want 403", code, raw)
	}
	if code, _, _ := alice.do("POST", "/v1/providers/inspect", map[string]any{}, nil); code == 403 || code == 401 {
		t.Fatalf("alice (admin) was refused module inspection: %d", code)
	}

	// Probe: a non-admin manages users; the admin may.
	bob.must(403, "GET", "/v1/users", nil, nil)
	bob.must(403, "POST", "/v1/users", map[string]any{"name": "eve", "password": "eve-password-1", "admin": true}, nil)
	var carol struct{ User struct{ ID string } }
	alice.must(201, "POST", "/v1/users", map[string]any{"name": "carol", "password": "carol-password-1"}, &carol)
	alice.must(400, "POST", "/v1/users", map[string]any{"name": "bad name", "password": "carol-password-1"}, nil)
	carolC := newWebClient(t, p.ready.URL)
	carolC.login("carol", "carol-password-1")
	bob.must(403, "DELETE", "/v1/users/"+carol.User.ID, nil, nil)
	alice.must(204, "DELETE", "/v1/users/"+carol.User.ID, nil, nil)
	carolC.must(401, "GET", "/v1/me", nil, nil)
	alice.must(404, "DELETE", "/v1/users/"+carol.User.ID, nil, nil)

	// Probes: cross-site writes and WebSockets with alice's valid cookie.
	evil := newWebClient(t, p.ready.URL)
	evil.header.Set("Cookie", alice.cookieHeader())
	evil.header.Set("Origin", "https://evil.example")
	evil.header.Set("Sec-Fetch-Site", "cross-site")
	if code, raw, _ := evil.do("POST", "/v1/workspaces/"+aliceWsID+"/resume", map[string]any{}, nil); code != 403 {
		t.Fatalf("cross-site POST with a valid cookie: %d %s, want 403", code, raw)
	}
	evil.header.Del("Origin") // fetch metadata alone is enough
	if code, raw, _ := evil.do("POST", "/v1/workspaces/"+aliceWsID+"/resume", map[string]any{}, nil); code != 403 {
		t.Fatalf("cross-site POST (Sec-Fetch-Site only) with a valid cookie: %d %s, want 403", code, raw)
	}
	if _, code := alice.dialWS(-1, http.Header{"Origin": {"https://evil.example"}}); code != 403 {
		t.Fatalf("cross-site WebSocket with a valid cookie: %d, want 403", code)
	}
	if _, code := alice.dialWS(-1, http.Header{"Sec-Fetch-Site": {"cross-site"}}); code != 403 {
		t.Fatalf("cross-site WebSocket (fetch metadata) with a valid cookie: %d, want 403", code)
	}
	// The same from the server's own origin works.
	if _, code := alice.dialWS(-1, http.Header{"Origin": {root}}); code != 101 {
		t.Fatalf("same-origin WebSocket: %d, want 101", code)
	}

	// Personal API tokens: made, used, refused once revoked; bob cannot
	// see or revoke alice's.
	var tok struct {
		Token string
		Info  struct{ ID string }
	}
	alice.must(400, "POST", "/v1/tokens", map[string]any{"expires_in_seconds": -1}, nil)
	alice.must(201, "POST", "/v1/tokens", map[string]any{"label": "ci", "expires_in_seconds": 3600}, &tok)
	script := newWebClient(t, p.ready.URL)
	script.bearer = tok.Token
	script.must(200, "GET", "/v1/workspaces/"+aliceWsID, nil, nil)
	if raw := bob.must(200, "GET", "/v1/tokens", nil, nil); bytes.Contains(raw, []byte(tok.Info.ID)) {
		t.Fatalf("bob lists alice's token: %s", raw)
	}
	bob.must(404, "DELETE", "/v1/tokens/"+tok.Info.ID, nil, nil)
	script.must(200, "GET", "/v1/me", nil, nil)
	alice.must(204, "DELETE", "/v1/tokens/"+tok.Info.ID, nil, nil)
	script.must(401, "GET", "/v1/me", nil, nil)
	// A token made with the CLI works too, and revoking it there ends it.
	cliTok := strings.TrimSpace(cli(t, "", "tokens", "create", "--data-dir", data, "--user", "bob", "--label", "cli"))
	script.bearer = cliTok
	script.must(200, "GET", "/v1/me", nil, nil)
	tokID := strings.Fields(strings.Split(cli(t, "", "tokens", "list", "--data-dir", data, "--user", "bob"), "\n")[1])[0]
	cli(t, "", "tokens", "revoke", "--data-dir", data, "--user", "bob", tokID)
	script.must(401, "GET", "/v1/me", nil, nil)

	// Probe: a logged-out session.
	stolen := newWebClient(t, p.ready.URL)
	stolen.header.Set("Cookie", alice.cookieHeader())
	stolen.must(200, "GET", "/v1/me", nil, nil)
	alice.must(204, "POST", "/v1/logout", nil, nil)
	stolen.must(401, "GET", "/v1/me", nil, nil)
	// A password change (CLI, while serving) ends bob's sessions.
	bob.must(200, "GET", "/v1/me", nil, nil)
	cli(t, "bob-password-33\n", "users", "passwd", "--data-dir", data, "bob")
	// Another process's change is believed within a second (auth.cacheFor).
	testsupport.Poll(t, 10*time.Second, func() error {
		if code, _, _ := bob.do("GET", "/v1/me", nil, nil); code != 401 {
			return fmt.Errorf("bob's session after passwd: %d, want 401", code)
		}
		return nil
	})
	bob.login("bob", "bob-password-33")

	// Probe: password guessing past the limit; even the right password is
	// then refused from this address.
	for i := 0; i < 5; i++ {
		if code, raw, _ := anon.do("POST", "/v1/login", map[string]string{"name": "alice", "password": fmt.Sprintf("guess-%d-xx", i)}, nil); code != 401 {
			t.Fatalf("guess %d: %d %s, want 401", i, code, raw)
		}
	}
	code, raw, h := anon.do("POST", "/v1/login", map[string]string{"name": "alice", "password": "alice-password-1"}, nil)
	if code != 429 || h.Get("Retry-After") == "" {
		t.Fatalf("login after 5 bad guesses: %d %s (Retry-After %q), want 429 with Retry-After", code, raw, h.Get("Retry-After"))
	}
	// Bad input loses nothing and says why.
	if code, raw, _ := anon.do("POST", "/v1/login", "not an object", nil); code != 400 {
		t.Fatalf("malformed login body: %d %s", code, raw)
	}
}

// TestServeSessionExpires: a session past --session-max is refused.
func TestServeSessionExpires(t *testing.T) {
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--session-idle", "1s", "--session-max", "2s", "--docker-scope", "unused"}})
	c := newWebClient(t, p.ready.URL)
	c.login("alice", "alice-password-1")
	testsupport.Poll(t, 30*time.Second, func() error {
		if code, _, _ := c.do("GET", "/v1/me", nil, nil); code != 401 {
			return fmt.Errorf("an expired session still answers %d", code)
		}
		return nil
	})
}

// TestServeTrustedProxy runs --auth proxy with 127.0.0.2 as the only
// trusted ingress: its user header names the user; the same header from
// 127.0.0.1 is ignored.
func TestServeTrustedProxy(t *testing.T) {
	data := t.TempDir()
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "proxy", "--trusted-proxy", "127.0.0.2/32",
		"--user-header", "X-Remote-User", "--listen", "127.0.0.1:0", "--docker-scope", "unused"}})
	ingress, outsider := clientFrom(t, "127.0.0.2", p.ready.URL), clientFrom(t, "127.0.0.1", p.ready.URL)

	// Probe: a spoofed user header from an untrusted peer.
	outsider.header.Set("X-Remote-User", "carol")
	outsider.must(401, "GET", "/v1/me", nil, nil)
	outsider.header.Set("X-Forwarded-Host", "evil.example") // ignored, so the real Host passes
	outsider.must(200, "GET", "/healthz", nil, nil)

	var me struct {
		User struct {
			Name, Issuer string
			Admin        bool
		}
	}
	ingress.header.Set("X-Remote-User", "carol")
	ingress.must(200, "GET", "/v1/me", nil, &me)
	if me.User.Name != "carol" || me.User.Issuer != "proxy" || !me.User.Admin {
		t.Fatalf("first proxy user: %+v, want carol, admin", me)
	}
	ingress.header.Set("X-Remote-User", "dave")
	ingress.must(200, "GET", "/v1/me", nil, &me)
	if me.User.Name != "dave" || me.User.Admin {
		t.Fatalf("second proxy user: %+v, want dave, not admin", me)
	}
	// The ingress's X-Forwarded-Host is believed (and checked).
	ingress.header.Set("X-Forwarded-Host", "evil.example")
	ingress.must(403, "GET", "/v1/me", nil, nil)
	if out := cli(t, "", "users", "list", "--data-dir", data); !strings.Contains(out, "carol") || !strings.Contains(out, "dave") {
		t.Fatalf("users list lacks the proxy users:\n%s", out)
	}
}

// TestServeLoginListen: without a sign-in method serve refuses a
// non-loopback address; with one it starts there.
func TestServeLoginListen(t *testing.T) {
	data := t.TempDir()
	out, err := exec.Command(companionBin, "serve", "--data-dir", data, "--listen", "0.0.0.0:0", "--docker-scope", "unused").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no login method") {
		t.Fatalf("serve on 0.0.0.0 without --auth: %v\n%s", err, out)
	}
	out, err = exec.Command(companionBin, "serve", "--data-dir", data, "--auth", "local", "--listen", "127.0.0.1:0", "--docker-scope", "unused").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "companion users add") {
		t.Fatalf("serve --auth local without users: %v\n%s", err, out)
	}
	addUser(t, data, "alice", "alice-password-1")
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--listen", "0.0.0.0:0", "--docker-scope", "unused"}})
	newWebClient(t, p.ready.URL).must(200, "GET", "/healthz", nil, nil)
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
