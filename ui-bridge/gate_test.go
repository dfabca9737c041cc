package uibridge

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

const electronOrigin = "app://canvas"

// rebindingClient sends every request to the test server whatever host the
// URL names, as a browser does after an attacker's DNS name was re-pointed
// at 127.0.0.1.
func rebindingClient(port int) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
		},
	}}
}

func TestGateHostAllowlist(t *testing.T) {
	e := newEnv(t, nil)
	port := strconv.Itoa(e.port)
	for _, path := range []string{"/healthz", "/v1/workspaces", "/v1/nowhere"} {
		for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1:1", "localhost.:" + port, "127.0.0.2:" + port} {
			resp, body := e.do("GET", path, "", "Host", host)
			e.expectError(resp, body, http.StatusForbidden, codeForbiddenHost)
		}
		for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port} {
			resp, body := e.do("GET", path, "", "Host", host)
			if resp.StatusCode == http.StatusForbidden {
				t.Fatalf("GET %s with Host %s: 403 %s", path, host, body)
			}
		}
	}

	// The WebSocket handshake of a rebound page: correct token even, but
	// the Host names the attacker's domain.
	c, resp, err := wsDial(context.Background(), "ws://rebind.evil.example:"+port+"/v1/ws", &dialOptions{
		HTTPClient:   rebindingClient(e.port),
		Subprotocols: []string{Subprotocol, BearerSubprotocolPrefix + e.token},
		HTTPHeader:   http.Header{"Origin": {"http://rebind.evil.example:" + port}},
	})
	if err == nil {
		c.Close()
		t.Fatal("WebSocket handshake with a foreign Host succeeded")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("WebSocket handshake with a foreign Host: %v, want 403", err)
	}
	// Without an Origin header only the Host check can refuse it.
	c, resp, err = wsDial(context.Background(), "ws://rebind.evil.example:"+port+"/v1/ws", &dialOptions{
		HTTPClient:   rebindingClient(e.port),
		Subprotocols: []string{Subprotocol, BearerSubprotocolPrefix + e.token},
	})
	if err == nil {
		c.Close()
		t.Fatal("WebSocket handshake with a foreign Host and no Origin succeeded")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("WebSocket handshake with a foreign Host and no Origin: %v, want 403", err)
	}
	// Same page, plain HTTP through the rebound name.
	req, _ := http.NewRequest("GET", "http://rebind.evil.example:"+port+"/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	hresp, err := rebindingClient(e.port).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.StatusCode != http.StatusForbidden {
		t.Fatalf("rebound HTTP request: status %d, want 403", hresp.StatusCode)
	}
}

func TestGateOriginAllowlist(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AllowedOrigins = []string{electronOrigin} })
	own := "http://127.0.0.1:" + strconv.Itoa(e.port)

	for _, origin := range []string{"http://evil.example", "null", own + "/", "https://127.0.0.1:" + strconv.Itoa(e.port), "http://127.0.0.1:1"} {
		resp, body := e.do("GET", "/v1/workspaces", "", "Origin", origin)
		e.expectError(resp, body, http.StatusForbidden, codeForbiddenOrigin)
		resp, body = e.do("POST", "/v1/accounts", `{"provider":"docker"}`, "Origin", origin)
		e.expectError(resp, body, http.StatusForbidden, codeForbiddenOrigin)
		resp, body = e.do("GET", "/healthz", "", "Origin", origin)
		e.expectError(resp, body, http.StatusForbidden, codeForbiddenOrigin)
	}
	for _, origin := range []string{own, "http://localhost:" + strconv.Itoa(e.port), electronOrigin} {
		resp, body := e.do("GET", "/v1/workspaces", "", "Origin", origin, "Sec-Fetch-Site", "cross-site")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET with allowed Origin %s: %d %s", origin, resp.StatusCode, body)
		}
		// An unsafe method from the allowed app passes the gate and
		// reaches the handler (which answers 404 for the unknown id).
		resp, body = e.do("PUT", "/v1/workspaces/ws_nope/keep", `{"keep":true}`, "Origin", origin, "Sec-Fetch-Site", "cross-site")
		e.expectError(resp, body, http.StatusNotFound, "not_found")
	}

	// A cross-site write without Origin (as some browsers send for
	// navigations) is refused by its fetch metadata.
	resp, body := e.do("POST", "/v1/workspaces/ws_nope/pause", "", "Sec-Fetch-Site", "cross-site")
	e.expectError(resp, body, http.StatusForbidden, codeCrossSite)
	resp, body = e.do("POST", "/v1/workspaces/ws_nope/pause", "", "Sec-Fetch-Site", "same-site")
	e.expectError(resp, body, http.StatusForbidden, codeCrossSite)

	// WebSocket handshake from a foreign page, with a valid token: 403.
	_, wresp, err := e.dial(context.Background(), "", &dialOptions{
		Subprotocols: []string{Subprotocol, BearerSubprotocolPrefix + e.token},
		HTTPHeader:   http.Header{"Origin": {"http://evil.example"}},
	})
	if err == nil || wresp == nil || wresp.StatusCode != http.StatusForbidden {
		t.Fatalf("WebSocket from a foreign Origin: err %v, want 403", err)
	}
	// Cross-site handshake without Origin: 403.
	_, wresp, err = e.dial(context.Background(), "", &dialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + e.token}, "Sec-Fetch-Site": {"cross-site"}},
	})
	if err == nil || wresp == nil || wresp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site WebSocket without Origin: err %v, want 403", err)
	}

	// The Electron app, as a browser: origin header, token as subprotocol.
	c, wresp, err := e.dial(context.Background(), "", &dialOptions{
		Subprotocols: []string{Subprotocol, BearerSubprotocolPrefix + e.token},
		HTTPHeader:   http.Header{"Origin": {electronOrigin}, "Sec-Fetch-Site": {"cross-site"}},
	})
	if err != nil {
		t.Fatalf("WebSocket from the allowed app origin: %v", err)
	}
	defer c.Close()
	if got := wresp.Header.Values("Sec-WebSocket-Protocol"); len(got) != 1 || got[0] != Subprotocol {
		t.Fatalf("selected subprotocol header %q, want exactly %q", got, Subprotocol)
	}
	if m := readMsg(t, c); m.Type != "snapshot" {
		t.Fatalf("first message %q, want snapshot", m.Type)
	}
}

func TestGateToken(t *testing.T) {
	e := newEnv(t, nil)

	resp, body := e.do("GET", "/healthz", "", "Authorization", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz without token: %d %s", resp.StatusCode, body)
	}
	if h := decode[map[string]string](t, body); h["status"] != "ok" || h["version"] != "test-1" {
		t.Fatalf("healthz body %s", body)
	}

	for _, auth := range []string{"", "Bearer", "Bearer wrong", "Bearer " + e.token + "x", "Basic " + e.token, "Bearer " + e.token[:len(e.token)-1]} {
		for _, path := range []string{"/v1/workspaces", "/v1/providers", "/v1/nowhere", "/v1"} {
			resp, body := e.do("GET", path, "", "Authorization", auth)
			e.expectError(resp, body, http.StatusUnauthorized, codeUnauthorized)
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("401 without WWW-Authenticate: Bearer")
			}
		}
	}
	resp, body = e.do("GET", "/v1/workspaces", "", "Authorization", "bearer "+e.token)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("lower-case bearer scheme: %d %s", resp.StatusCode, body)
	}
	// The subprotocol carries a token only on a WebSocket handshake.
	resp, body = e.do("GET", "/v1/workspaces", "", "Authorization", "", "Sec-WebSocket-Protocol", Subprotocol+", "+BearerSubprotocolPrefix+e.token)
	e.expectError(resp, body, http.StatusUnauthorized, codeUnauthorized)

	// WebSocket: no token, wrong token in either place.
	for _, opts := range []*dialOptions{
		{HTTPHeader: http.Header{}},
		{HTTPHeader: http.Header{"Authorization": {"Bearer nope"}}},
		{HTTPHeader: http.Header{}, Subprotocols: []string{Subprotocol, BearerSubprotocolPrefix + "nope"}},
	} {
		_, wresp, err := e.dial(context.Background(), "", opts)
		if err == nil || wresp == nil || wresp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("WebSocket without a valid token: err %v, want 401", err)
		}
	}
	// companion.v1 must be offered.
	_, wresp, err := e.dial(context.Background(), "", &dialOptions{Subprotocols: []string{BearerSubprotocolPrefix + e.token}, HTTPHeader: http.Header{}})
	if err == nil || wresp == nil || wresp.StatusCode != http.StatusBadRequest {
		t.Fatalf("WebSocket without companion.v1: err %v, want 400", err)
	}

	// The token as a subprotocol works and is not echoed.
	c, wresp, err := e.dial(context.Background(), "", &dialOptions{
		Subprotocols: []string{BearerSubprotocolPrefix + e.token, Subprotocol},
		HTTPHeader:   http.Header{},
	})
	if err != nil {
		t.Fatalf("WebSocket with subprotocol token: %v", err)
	}
	defer c.Close()
	if c.Subprotocol() != Subprotocol {
		t.Fatalf("negotiated %q, want %q", c.Subprotocol(), Subprotocol)
	}
	for _, v := range wresp.Header.Values("Sec-WebSocket-Protocol") {
		if strings.Contains(v, e.token) || strings.Contains(v, "bearer") {
			t.Fatalf("handshake answer echoes the bearer entry: %q", v)
		}
	}
	if m := readMsg(t, c); m.Type != "snapshot" {
		t.Fatalf("first message %q, want snapshot", m.Type)
	}

	// A plain GET on the stream route.
	resp, body = e.do("GET", "/v1/ws", "")
	e.expectError(resp, body, http.StatusUpgradeRequired, "websocket_required")

	if strings.Contains(e.logs.String(), e.token) {
		t.Fatal("the token appears in the log")
	}
}

func TestNewRefusesUnsafeConfig(t *testing.T) {
	e := newEnv(t, nil)
	base := Config{Service: e.svc, Token: "t", AllowedHosts: LoopbackHosts(1)}
	for name, mod := range map[string]func(*Config){
		"no service":       func(c *Config) { c.Service = nil },
		"no hosts":         func(c *Config) { c.AllowedHosts = nil },
		"host with a path": func(c *Config) { c.AllowedHosts = []string{"localhost/x"} },
		"host with a user": func(c *Config) { c.AllowedHosts = []string{"me@localhost:80"} },
		"no auth":          func(c *Config) { c.Token = "" },
		"wildcard origin":  func(c *Config) { c.AllowedOrigins = []string{"*"} },
		"origin path":      func(c *Config) { c.AllowedOrigins = []string{"app://canvas/x"} },
	} {
		cfg := base
		mod(&cfg)
		if s, err := New(cfg); err == nil {
			s.Close()
			t.Errorf("%s: New accepted the config", name)
		}
	}
}

// headerAuth is a second way in, as serve mode's login will be: it trusts
// a header naming the user. It exercises the Authenticator hook.
type headerAuth struct{}

func (headerAuth) Authenticate(r *http.Request) (Identity, bool) {
	u := r.Header.Get("X-Test-User")
	return Identity{Owner: u}, u != ""
}

func TestGateCORSForAllowedApp(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AllowedOrigins = []string{electronOrigin} })

	// The app's fetch with a token is preflighted; the preflight carries
	// no token and must still succeed, for allowed origins only.
	resp, body := e.do("OPTIONS", "/v1/workspaces", "", "Authorization", "", "Origin", electronOrigin,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type",
		"Access-Control-Request-Private-Network", "true")
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != electronOrigin ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		h.Get("Access-Control-Allow-Private-Network") != "true" || h.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("preflight: %d %v %s", resp.StatusCode, h, body)
	}
	resp, body = e.do("OPTIONS", "/v1/workspaces", "", "Authorization", "", "Origin", "http://evil.example", "Access-Control-Request-Method", "POST")
	e.expectError(resp, body, http.StatusForbidden, codeForbiddenOrigin)
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("a foreign origin got an Access-Control-Allow-Origin")
	}

	// The actual request, and an error answer, are readable by the app.
	resp, _ = e.do("GET", "/v1/workspaces", "", "Origin", electronOrigin)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != electronOrigin {
		t.Fatalf("GET from the app: %d %v", resp.StatusCode, resp.Header)
	}
	resp, body = e.do("GET", "/v1/workspaces", "", "Origin", electronOrigin, "Authorization", "")
	e.expectError(resp, body, http.StatusUnauthorized, codeUnauthorized)
	if resp.Header.Get("Access-Control-Allow-Origin") != electronOrigin {
		t.Fatal("the app cannot read a 401")
	}
	// Without Origin (a program) there is nothing to allow.
	resp, _ = e.do("GET", "/v1/workspaces", "")
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("Access-Control-Allow-Origin without an Origin")
	}
}
