package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// These tests put serve --auth local behind Debian's Caddy, as a team
// deploys it, and fail sign-ins through it from several client
// addresses (loopback 127.0.0.0/8, so each client binds its own). Caddy
// connects to serve from 127.0.0.1, the only --trusted-proxy.

// loginBehindCaddy starts serve with user alice behind Caddy. It returns
// serve's proc and Caddy's URL.
func loginBehindCaddy(t *testing.T) (*proc, string) {
	t.Helper()
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	port, caddyPort := freePort(t), freePort(t)
	caddy := "http://127.0.0.1:" + caddyPort
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local",
		"--trusted-proxy", "127.0.0.1/32", "--listen", "127.0.0.1:" + port,
		"--allow-host", "127.0.0.1:" + caddyPort, "--docker-scope", "unused"}})
	startCaddy(t, t.TempDir(), caddyPort, []string{port})
	return p, caddy
}

// spray fails n sign-ins with made-up user names from c, each with a
// made-up X-Forwarded-For too (a client cannot choose its address).
func spray(t *testing.T, c *webClient, n int) {
	t.Helper()
	for i := range n {
		c.header.Set("X-Forwarded-For", fmt.Sprintf("10.66.%d.%d", i/250, i%250+1))
		body := map[string]string{"name": fmt.Sprintf("made-up-%d", i), "password": "guess-guess"}
		if code, raw, _ := c.do("POST", "/v1/login", body, nil); code != 401 {
			t.Fatalf("made-up name %d: %d %s, want 401", i, code, raw)
		}
	}
	c.header.Del("X-Forwarded-For")
}

// wantLimited asserts a sign-in from c is refused with 429 and a
// Retry-After within the 15-minute per-address window.
func wantLimited(t *testing.T, c *webClient, name, password string) {
	t.Helper()
	code, raw, h := c.do("POST", "/v1/login", map[string]string{"name": name, "password": password}, nil)
	secs, err := strconv.Atoi(h.Get("Retry-After"))
	if code != 429 || err != nil || secs < 1 || secs > 15*60 {
		t.Fatalf("sign-in as %s: %d %s (Retry-After %q), want 429 with Retry-After 1..900 s", name, code, raw, h.Get("Retry-After"))
	}
}

// TestServeLoginLimitsBehindCaddy is issue 25's scenario: 31 failed
// sign-ins with made-up names through the ingress from one client, then
// a real user from another client signs in (before the fix every client
// was the ingress's address, so she got 429 for about 15 minutes).
func TestServeLoginLimitsBehindCaddy(t *testing.T) {
	p, caddy := loginBehindCaddy(t)
	attacker := clientFrom(t, "127.0.0.2", caddy)
	spray(t, attacker, 30)
	// The 31st from the attacker's address is refused.
	wantLimited(t, attacker, "made-up-31", "guess-guess")

	alice := clientFrom(t, "127.0.0.3", caddy)
	alice.login("alice", "alice-password-1")
	var me struct{ User struct{ Name string } }
	alice.must(200, "GET", "/v1/me", nil, &me)
	if me.User.Name != "alice" {
		t.Fatalf("me: %+v", me)
	}
	// Serve counted the client Caddy named, not Caddy.
	if log := p.stderr.String(); !strings.Contains(log, `"addr":"127.0.0.3"`) {
		t.Fatalf("the sign-in was not logged with alice's own address 127.0.0.3:\n%s", log)
	}
}

// TestServeLoginLimitsBehindCaddyStillStopAttacker: the attacker's own
// address stays limited through the ingress, for made-up and real names
// alike, whatever X-Forwarded-For it sends; a peer outside
// --trusted-proxy cannot charge its failures to somebody else's address.
func TestServeLoginLimitsBehindCaddyStillStopAttacker(t *testing.T) {
	p, caddy := loginBehindCaddy(t)
	attacker := clientFrom(t, "127.0.0.2", caddy)
	spray(t, attacker, 30)
	wantLimited(t, attacker, "made-up-31", "guess-guess")
	wantLimited(t, attacker, "alice", "alice-password-1")
	attacker.header.Set("X-Forwarded-For", "127.0.0.9")
	wantLimited(t, attacker, "made-up-32", "guess-guess")

	// Straight to serve from 127.0.0.4, naming 127.0.0.5 in the header:
	// the peer is not trusted, so 127.0.0.4 is the one counted.
	direct := clientFrom(t, "127.0.0.4", p.ready.URL)
	spray(t, direct, 30)
	direct.header.Set("X-Forwarded-For", "127.0.0.5")
	wantLimited(t, direct, "made-up-31", "guess-guess")
	clientFrom(t, "127.0.0.5", caddy).login("alice", "alice-password-1")
}
