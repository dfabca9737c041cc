package apicontract

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
)

// load reads the repository's document.
func load(t *testing.T) *Checker {
	t.Helper()
	data, err := os.ReadFile("../../../ui-bridge/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// server answers each "METHOD path" with a canned status and JSON body,
// standing in for a companion that breaks the contract on purpose.
func server(t *testing.T, answers map[string]struct {
	status int
	body   string
}) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.Method+" "+r.URL.Path]
		if !ok {
			a.status, a.body = 404, `{"error":{"code":"not_found","message":"no such route"}}`
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCheckerFailsOnBreaches proves the checker can fail: an undocumented
// field, status, route and method, a request the document refuses that is
// answered 2xx, and a refusal without the error body are each reported,
// while documented exchanges pass.
func TestCheckerFailsOnBreaches(t *testing.T) {
	c := load(t)
	type answer = struct {
		status int
		body   string
	}
	srv := server(t, map[string]answer{
		"GET /healthz":                 {200, `{"status":"ok","version":"1"}`},
		"GET /v1/me":                   {200, `{"user":null,"admin":true,"method":"launch_token","extra":1}`},
		"GET /v1/accounts":             {418, `{"error":{"code":"teapot","message":"no"}}`},
		"GET /v1/invented":             {200, `{}`},
		"PUT /v1/accounts":             {200, `{}`},
		"PUT /v1/workspaces/ws_1/keep": {200, `{"workspace":{"id":"ws_1","name":"n","provider":"docker","account_id":"a","state":"running","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","rev":1}}`},
		"POST /v1/workspaces":          {400, `oops`},
		"POST /v1/accounts":            {429, `{"error":{"code":"rate_limited","message":"slow down"}}`},
		"GET /v1/workspaces/ws_1":      {200, `{"workspace":{"id":"ws_1","name":"n","provider":"docker","account_id":"a","state":"running","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","rev":1}}`},
		"GET /v1/workspaces/ws_2":      {200, `{"workspace":{"id":"ws_2","name":"n","provider":"docker","account_id":"a","state":"running","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","rev":1,"box_key":"secret"}}`},
	})
	c.Register(srv.URL)
	hc := &http.Client{Transport: c.Transport(nil)}
	do := func(method, path, body string) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, srv.URL+path, r)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	cases := []struct {
		method, path, body string
		want               string // "" when the exchange is documented
	}{
		{"GET", "/healthz", "", ""},
		{"GET", "/v1/workspaces/ws_1", "", ""},
		{"GET", "/v1/nope", "", ""}, // 404 with the error body: companion agrees
		{"GET", "/v1/me", "", "extra"},
		{"GET", "/v1/workspaces/ws_2", "", "box_key"},
		{"GET", "/v1/accounts", "", "status is not supported"},
		{"GET", "/v1/invented", "", "no route of the document matches /v1/invented"},
		{"PUT", "/v1/accounts", "", "the document has no PUT on /v1/accounts"},
		{"PUT", "/v1/workspaces/ws_1/keep", `{"keep":true,"color":"red"}`, "the document refuses this request"},
		{"POST", "/v1/workspaces", `{"name":"x"}`, "failed to decode response body"},
		{"POST", "/v1/workspaces", `{"name":"x","colour":"red"}`, "must carry the error body"},
		{"POST", "/v1/accounts", `{"provider":"docker"}`, "Retry-After"}, // a 429 without it
	}
	for _, tc := range cases {
		do(tc.method, tc.path, tc.body)
		got := c.Forget(srv.URL)
		c.Register(srv.URL)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%s %s: want no failure, got %q", tc.method, tc.path, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%s %s: want one failure naming %q, got %q", tc.method, tc.path, tc.want, got)
		}
	}

	// Exchanges with anything not registered pass unchecked.
	c.Forget(srv.URL)
	do("GET", "/v1/invented", "")
	if f := c.Failures(); len(f) > 0 {
		t.Errorf("an unregistered host was checked: %q", f)
	}
}

// TestCheckMessage checks stream messages against StreamMessage.
func TestCheckMessage(t *testing.T) {
	c := load(t)
	c.Register("http://127.0.0.1:1")
	good := `{"type":"remove","rev":3,"server_time":"2026-01-01T00:00:00Z","id":"ws_1"}`
	c.CheckMessage("127.0.0.1:1", []byte(good))
	if f := c.Failures(); len(f) > 0 {
		t.Fatalf("a documented message failed: %q", f)
	}
	c.CheckMessage("127.0.0.1:1", []byte(`{"type":"remove","rev":3,"server_time":"2026-01-01T00:00:00Z","id":"ws_1","why":"x"}`))
	if f := c.Failures(); len(f) != 1 {
		t.Fatalf("an undocumented field passed: %q", f)
	}
}

// TestBrowserProxyChecks: a browser's plain requests through the proxy are
// checked like a Go client's, and the browser gets companion's answer.
func TestBrowserProxyChecks(t *testing.T) {
	c := load(t)
	srv := server(t, map[string]struct {
		status int
		body   string
	}{
		"GET /healthz": {200, `{"status":"ok","version":"1","uptime":3}`},
	})
	c.Register(srv.URL)
	bp, err := c.NewBrowserProxy()
	if err != nil {
		t.Fatal(err)
	}
	defer bp.Close()
	proxy, _ := url.Parse("http://" + bp.Addr)
	hc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	resp, err := hc.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"uptime":3`) {
		t.Fatalf("through the proxy: %d %s", resp.StatusCode, b)
	}
	if f := c.Forget(srv.URL); len(f) != 1 || !strings.Contains(f[0], "uptime") {
		t.Fatalf("the undocumented field through the proxy: failures %q, want one naming uptime", f)
	}
}

// TestBrowserProxyLoopbackOnly: the browser proxy refuses at once what
// is not on loopback, plain or CONNECT, without resolving or dialing it:
// the browser's background traffic must not hold its connections to the
// proxy while a resolver or a dial to the outside takes its time.
func TestBrowserProxyLoopbackOnly(t *testing.T) {
	c := load(t)
	bp, err := c.NewBrowserProxy()
	if err != nil {
		t.Fatal(err)
	}
	defer bp.Close()
	proxy, _ := url.Parse("http://" + bp.Addr)
	hc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	resp, err := hc.Get("http://updates.example.invalid/check")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a plain request off loopback: %d, want 403 at once", resp.StatusCode)
	}
	conn, err := net.Dial("tcp", bp.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT accounts.example.invalid:443 HTTP/1.1\r\nHost: accounts.example.invalid:443\r\n\r\n")
	cr, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if cr.StatusCode != http.StatusForbidden {
		t.Errorf("a CONNECT off loopback: %d, want 403 at once", cr.StatusCode)
	}
}
