package hostcall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/providers/wasm"
	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/secrets"
)

const (
	apiToken = "tok-API-0123456789abcdef"
	logsKey  = "key-LOGS-0123456789abcdef"
)

// keyring stores creds (name -> value) for the test account acc-1 in the
// real OS keyring (Secret Service) under a namespace of its own, removes
// them when the test ends, and returns the host's reader of that keyring.
// Without a keyring the test is skipped, or fails when
// COMPANION_REQUIRE_KEYRING=1 (scripts/with-keyring.sh starts a private
// one).
func keyring(t *testing.T, creds map[string]string) hostcall.Credentials {
	t.Helper()
	ctx := context.Background()
	k := &secrets.Keyring{Namespace: core.NewID("test")}
	testsupport.NeedKeyring(t, k)
	for name, v := range creds {
		key := core.CredentialKey(testAccount, name)
		if err := k.Set(ctx, key, v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := k.Delete(ctx, key); err != nil {
				t.Errorf("delete %s: %v", key, err)
			}
		})
	}
	return wasm.FromSecrets(k)
}

const testAccount = "acc-1"

// recorder is an upstream that records what reached it.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
	body []string
	n    atomic.Int64
}

func newRecorder(t *testing.T, h http.HandlerFunc) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, req.Clone(context.Background()))
		r.body = append(r.body, string(b))
		r.mu.Unlock()
		r.n.Add(1)
		if h != nil {
			h(w, req)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) last() (*http.Request, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		return nil, ""
	}
	return r.reqs[len(r.reqs)-1], r.body[len(r.body)-1]
}

func policy(t *testing.T, edit func(m map[string]any), creds hostcall.Credentials) *hostcall.Policy {
	t.Helper()
	m := map[string]any{
		"name": "acme", "version": "1.0.0", "abi_version": 1, "description": "test",
		"upstreams": map[string]any{
			"api":  map[string]any{"base_url": "https://api.acme.example/v2", "override": "api_url"},
			"logs": map[string]any{"base_url": "https://logs.acme.example", "override": "logs_url"},
		},
		"credentials": []any{
			map[string]any{"name": "token", "description": "t", "header": "Authorization", "format": "Bearer {token}", "upstreams": []any{"api"}},
			map[string]any{"name": "logs_key", "description": "k", "header": "X-API-Key", "upstreams": []any{"logs"}},
		},
		"config": []any{
			map[string]any{"name": "api_url", "description": "a"},
			map[string]any{"name": "logs_url", "description": "l"},
		},
		"limits":       map[string]any{"response_bytes": 4096, "requests_per_call": 4},
		"capabilities": map[string]any{"list": true},
	}
	if edit != nil {
		edit(m)
	}
	b, _ := json.Marshal(m)
	man, err := manifest.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	tr := hostcall.NewTransports()
	t.Cleanup(tr.Close)
	return hostcall.NewPolicy(man, creds, tr)
}

func acct(cfg map[string]string) *core.Account { return &core.Account{ID: testAccount, Config: cfg} }

func do(t *testing.T, c *hostcall.Call, req map[string]any) hostcall.Result {
	t.Helper()
	b, _ := json.Marshal(req)
	out := c.Do(context.Background(), b)
	var r hostcall.Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("result %s: %v", out, err)
	}
	if strings.Contains(string(out), apiToken) || strings.Contains(string(out), logsKey) {
		t.Fatalf("a credential reached the module: %s", out)
	}
	return r
}

func wantErr(t *testing.T, r hostcall.Result, kind string, contains string) {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("want %s error, got status %d", kind, r.Status)
	}
	if r.Error.Kind != kind || !strings.Contains(r.Error.Message, contains) {
		t.Fatalf("want %s %q, got %s %q", kind, contains, r.Error.Kind, r.Error.Message)
	}
}

func TestInjectsCredentialsOnlyTowardBoundUpstreams(t *testing.T) {
	api := newRecorder(t, nil)
	logs := newRecorder(t, nil)
	p := policy(t, nil, keyring(t, map[string]string{"token": apiToken, "logs_key": logsKey}))
	c := p.NewCall(acct(map[string]string{"api_url": api.URL + "/base/", "logs_url": logs.URL}))

	r := do(t, c, map[string]any{"upstream": "api", "method": "post", "path": "/boxes/a%2Fb", "query": map[string]any{"x": []string{"1", "2"}, "y": "z"},
		"headers": map[string]string{"Accept": "application/json", "Content-Type": "application/json"}, "body": `{"n":1}`})
	if r.Error != nil || r.Status != 200 || *r.Body != "ok" {
		t.Fatalf("%+v", r)
	}
	req, body := api.last()
	if got := req.Header.Get("Authorization"); got != "Bearer "+apiToken {
		t.Fatalf("Authorization %q", got)
	}
	if req.Header.Get("X-Api-Key") != "" {
		t.Fatal("logs key sent to the api upstream")
	}
	if req.Method != "POST" || req.URL.EscapedPath() != "/base/boxes/a%2Fb" || req.URL.RawQuery != "x=1&x=2&y=z" || body != `{"n":1}` {
		t.Fatalf("%s %s?%s %q", req.Method, req.URL.EscapedPath(), req.URL.RawQuery, body)
	}
	if req.Header.Get("Accept") != "application/json" || !strings.HasPrefix(req.Header.Get("User-Agent"), "companion-wasm/acme") {
		t.Fatalf("headers %v", req.Header)
	}

	do(t, c, map[string]any{"upstream": "logs", "path": "/tail"})
	req, _ = logs.last()
	if req.Header.Get("X-API-Key") != logsKey || req.Header.Get("Authorization") != "" {
		t.Fatalf("logs headers %v", req.Header)
	}
	if c.Violation() != nil {
		t.Fatal(c.Violation())
	}
}

func TestRefusesSensitiveHeaders(t *testing.T) {
	api := newRecorder(t, nil)
	// No credential is ever read here: every request is refused before the
	// host would inject one, so there is no credential store.
	p := policy(t, nil, nil)
	for _, h := range []string{"Authorization", "authorization", "Proxy-Authorization", "Cookie", "x-api-key", "Proxy-Foo"} {
		c := p.NewCall(acct(map[string]string{"api_url": api.URL}))
		r := do(t, c, map[string]any{"upstream": "api", "path": "/", "headers": map[string]string{h: "mine"}})
		wantErr(t, r, "forbidden", "credentials are injected by the host only")
		if c.Violation() == nil {
			t.Fatalf("%s: no violation recorded", h)
		}
		// Once a rule is broken, nothing more goes out in this call.
		r = do(t, c, map[string]any{"upstream": "api", "path": "/"})
		wantErr(t, r, "forbidden", "already broke a sandbox rule")
	}
	for _, h := range []string{"Host", "Content-Length", "Transfer-Encoding", "X-Forwarded-For"} {
		c := p.NewCall(acct(map[string]string{"api_url": api.URL}))
		r := do(t, c, map[string]any{"upstream": "api", "path": "/", "headers": map[string]string{h: "1"}})
		wantErr(t, r, "invalid", "set by the host")
		if c.Violation() != nil {
			t.Fatalf("%s: a malformed request is not a violation", h)
		}
	}
	c := p.NewCall(acct(map[string]string{"api_url": api.URL}))
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/", "headers": map[string]string{"X-A": "a\r\nX-B: b"}}), "invalid", "invalid value")
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/", "headers": map[string]string{"Bad Name": "a"}}), "invalid", "not a valid header name")
	if n := api.n.Load(); n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}
}

func TestRequestShape(t *testing.T) {
	api := newRecorder(t, nil)
	p := policy(t, nil, keyring(t, map[string]string{"token": apiToken}))
	c := p.NewCall(acct(map[string]string{"api_url": api.URL}))
	for path, want := range map[string]string{
		"relative":        "must start with a single /",
		"//evil.example/": "must start with a single /",
		"/a/../../etc":    ". or .. segments",
		"/a/%2e%2e/b":     ". or .. segments",
		"/a?b=c":          "put parameters in query",
		"/a#frag":         "put parameters in query",
		"/a b":            "percent-encoded",
		"/%zz":            "bad escape",
	} {
		wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": path}), "invalid", want)
	}
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/", "method": "TRACE"}), "invalid", "method")
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/", "url": "https://evil.example"}), "invalid", "malformed request")
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/", "body": "a", "body_base64": "YQ=="}), "invalid", "not both")
	if c.Violation() != nil || api.n.Load() != 0 {
		t.Fatal("malformed requests must neither go out nor count as violations")
	}
	r := do(t, c, map[string]any{"upstream": "api", "path": "/bin", "method": "PUT", "body_base64": []byte{0, 1, 2}})
	if r.Error != nil {
		t.Fatal(r.Error)
	}
	if _, body := api.last(); body != "\x00\x01\x02" {
		t.Fatalf("%q", body)
	}
	// Describe runs without an account, and so without the network.
	wantErr(t, do(t, p.NewCall(nil), map[string]any{"upstream": "api", "path": "/"}), "invalid", "describe")
}

func TestUndeclaredUpstream(t *testing.T) {
	p := policy(t, nil, nil) // refused before any credential is looked up
	c := p.NewCall(acct(nil))
	wantErr(t, do(t, c, map[string]any{"upstream": "evil", "path": "/"}), "forbidden", `upstream "evil"`)
	if c.Violation() == nil {
		t.Fatal("no violation")
	}
}

func TestPrivateAddresses(t *testing.T) {
	srv := newRecorder(t, nil)
	port := srv.Listener.Addr().(interface{ String() string }).String()
	port = port[strings.LastIndex(port, ":")+1:]
	for _, host := range []string{"127.0.0.1", "localhost", "[::ffff:127.0.0.1]"} {
		p := policy(t, func(m map[string]any) {
			m["upstreams"].(map[string]any)["api"] = map[string]any{"base_url": "https://" + host + ":" + port, "override": "api_url"}
		}, keyring(t, map[string]string{"token": apiToken}))
		c := p.NewCall(acct(nil))
		wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/"}), "forbidden", "private, loopback or link-local")
		if c.Violation() == nil {
			t.Fatal("no violation")
		}
		// The account may point the upstream there explicitly (self-hosted
		// deployments, tests): that exact host:port is then reachable.
		c = p.NewCall(acct(map[string]string{"api_url": "http://" + host + ":" + port}))
		if r := do(t, c, map[string]any{"upstream": "api", "path": "/"}); r.Error != nil {
			t.Fatalf("%s: %v", host, r.Error.Message)
		}
	}
	if srv.n.Load() != 3 {
		t.Fatalf("%d requests reached the server; only the 3 configured ones should", srv.n.Load())
	}
}

func TestBlocked(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.1.1": true, "169.254.169.254": true,
		"0.0.0.0": true, "100.64.0.1": true, "224.0.0.1": true, "255.255.255.255": true, "::1": true, "::": true,
		"fe80::1": true, "fc00::1": true, "ff02::1": true, "::ffff:10.0.0.1": true, "64:ff9b::a00:1": true,
		"2002:c0a8:101::1": true, "198.18.0.1": true,
		"8.8.8.8": false, "1.1.1.1": false, "2606:4700:4700::1111": false, "64:ff9b::808:808": false,
	} {
		if got := hostcall.Blocked(netip.MustParseAddr(s)); got != want {
			t.Errorf("hostcall.Blocked(%s) = %v", s, got)
		}
	}
}

func TestRedirects(t *testing.T) {
	elsewhere := newRecorder(t, nil)
	logs := newRecorder(t, nil)
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, elsewhere.URL+"/x", http.StatusFound)
		case "/to-logs":
			http.Redirect(w, r, logs.URL+"/y", http.StatusTemporaryRedirect)
		case "/same":
			http.Redirect(w, r, "/final", http.StatusMovedPermanently)
		case "/see-other":
			http.Redirect(w, r, "/final", http.StatusSeeOther)
		case "/file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			fmt.Fprint(w, "final")
		}
	})
	p := policy(t, func(m map[string]any) {
		m["limits"].(map[string]any)["requests_per_call"] = 50
	}, keyring(t, map[string]string{"token": apiToken, "logs_key": logsKey}))
	cfg := map[string]string{"api_url": api.URL, "logs_url": logs.URL}

	c := p.NewCall(acct(cfg))
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/away"}), "forbidden", "not a host this module may reach")
	if elsewhere.n.Load() != 0 {
		t.Fatal("redirect to an undeclared host was followed")
	}
	c = p.NewCall(acct(cfg))
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/file"}), "forbidden", "file URL")

	c = p.NewCall(acct(cfg))
	if r := do(t, c, map[string]any{"upstream": "api", "path": "/same"}); r.Error != nil || *r.Body != "final" {
		t.Fatalf("%+v", r)
	}
	req, _ := api.last()
	if req.Header.Get("Authorization") != "Bearer "+apiToken {
		t.Fatal("same-origin hop lost its credential")
	}
	// 307 to another declared upstream keeps method and body; the api
	// token stays behind and the logs key is added.
	if r := do(t, c, map[string]any{"upstream": "api", "method": "POST", "path": "/to-logs", "body": "payload"}); r.Error != nil {
		t.Fatal(r.Error.Message)
	}
	req, body := logs.last()
	if req.Method != "POST" || body != "payload" || req.Header.Get("Authorization") != "" || req.Header.Get("X-Api-Key") != logsKey {
		t.Fatalf("%s %q %v", req.Method, body, req.Header)
	}
	// 303 turns a POST into a GET without a body.
	if r := do(t, c, map[string]any{"upstream": "api", "method": "POST", "path": "/see-other", "body": "x", "headers": map[string]string{"Content-Type": "text/plain"}}); r.Error != nil {
		t.Fatal(r.Error.Message)
	}
	req, body = api.last()
	if req.Method != "GET" || body != "" || req.Header.Get("Content-Type") != "" {
		t.Fatalf("%s %q", req.Method, body)
	}
	c = p.NewCall(acct(cfg))
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/loop"}), "unavailable", "redirected more than")
}

func TestResponseCap(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/exact":
			w.Write([]byte(strings.Repeat("a", 4096)))
		case "/declared":
			w.Header().Set("Content-Length", "100000")
			w.WriteHeader(200)
		case "/stream":
			f := w.(http.Flusher)
			for i := 0; i < 100; i++ {
				w.Write([]byte(strings.Repeat("b", 1000)))
				f.Flush()
			}
		}
	})
	p := policy(t, nil, keyring(t, map[string]string{"token": apiToken}))
	cfg := map[string]string{"api_url": api.URL}
	if r := do(t, p.NewCall(acct(cfg)), map[string]any{"upstream": "api", "path": "/exact"}); r.Error != nil || len(*r.Body) != 4096 {
		t.Fatalf("a response of exactly the limit must pass: %+v", r.Error)
	}
	wantErr(t, do(t, p.NewCall(acct(cfg)), map[string]any{"upstream": "api", "path": "/declared"}), "forbidden", "100000-byte response")
	c := p.NewCall(acct(cfg))
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/stream"}), "forbidden", "more than 4096 bytes")
	if c.Violation() == nil {
		t.Fatal("no violation")
	}
}

func TestRequestsPerCall(t *testing.T) {
	api := newRecorder(t, nil)
	p := policy(t, nil, keyring(t, map[string]string{"token": apiToken}))
	c := p.NewCall(acct(map[string]string{"api_url": api.URL}))
	for i := 0; i < 4; i++ {
		if r := do(t, c, map[string]any{"upstream": "api", "path": "/"}); r.Error != nil {
			t.Fatal(r.Error.Message)
		}
	}
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/"}), "forbidden", "more than 4 requests")
	if api.n.Load() != 4 {
		t.Fatalf("%d requests", api.n.Load())
	}
	// A new call starts counting again.
	if r := do(t, p.NewCall(acct(map[string]string{"api_url": api.URL})), map[string]any{"upstream": "api", "path": "/"}); r.Error != nil {
		t.Fatal(r.Error.Message)
	}
}

func TestCredentialProblems(t *testing.T) {
	api := newRecorder(t, nil)
	cfg := map[string]string{"api_url": api.URL}
	wantErr(t, do(t, policy(t, nil, keyring(t, nil)).NewCall(acct(cfg)), map[string]any{"upstream": "api", "path": "/"}), "unauthorized", `no credential "token"`)
	const smuggler = "tok-abcdef\r\nX-Evil: 1"
	c := policy(t, nil, keyring(t, map[string]string{"token": smuggler})).NewCall(acct(cfg))
	r := do(t, c, map[string]any{"upstream": "api", "path": "/"})
	wantErr(t, r, "unauthorized", "cannot go in an HTTP header")
	if strings.Contains(r.Error.Message, "tok-abcdef") {
		t.Fatal("credential value in the error")
	}
	wantErr(t, do(t, policy(t, nil, nil).NewCall(acct(cfg)), map[string]any{"upstream": "api", "path": "/"}), "unavailable", "no credential store")
	if api.n.Load() != 0 {
		t.Fatal("request sent without its credential")
	}
	// A bad override is the account's problem, reported as invalid.
	wantErr(t, do(t, policy(t, nil, keyring(t, nil)).NewCall(acct(map[string]string{"api_url": "https://u:p@x.example"})), map[string]any{"upstream": "api", "path": "/"}), "invalid", "api_url")
}

func TestScrubsEchoedCredentialsAndCookies(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.Header().Add("Set-Cookie", "a=b")
		fmt.Fprintf(w, "you sent %s", r.Header.Get("Authorization"))
	})
	p := policy(t, nil, keyring(t, map[string]string{"token": apiToken}))
	c := p.NewCall(acct(map[string]string{"api_url": api.URL}))
	r := do(t, c, map[string]any{"upstream": "api", "path": "/"}) // do() fails on any leak
	if *r.Body != "you sent Bearer "+hostcall.Redacted || r.Headers["X-Echo"] != "Bearer "+hostcall.Redacted {
		t.Fatalf("%q %v", *r.Body, r.Headers)
	}
	if _, ok := r.Headers["Set-Cookie"]; ok {
		t.Fatal("Set-Cookie passed to the module")
	}
	if got := c.Redact("x " + apiToken + " y"); got != "x "+hostcall.Redacted+" y" {
		t.Fatal(got)
	}
}

func TestHonoursCallContext(t *testing.T) {
	release := make(chan struct{})
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	p := policy(t, nil, keyring(t, map[string]string{"token": apiToken}))
	c := p.NewCall(acct(map[string]string{"api_url": api.URL}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	out := c.Do(ctx, []byte(`{"upstream":"api","path":"/slow"}`))
	var r hostcall.Result
	json.Unmarshal(out, &r)
	wantErr(t, r, "unavailable", "deadline")
}

// TestTricklingBodyEndsAtTheDeadline: headers, then a body that trickles
// and never ends. The request ends at the call's deadline with an error
// that says so, and the host hangs up on the trickle.
func TestTricklingBodyEndsAtTheDeadline(t *testing.T) {
	hungUp := make(chan struct{})
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"items":[`))
		for {
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				close(hungUp)
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := w.Write([]byte(" ")); err != nil {
				close(hungUp)
				return
			}
		}
	})
	p := policy(t, nil, keyring(t, map[string]string{"token": apiToken}))
	c := p.NewCall(acct(map[string]string{"api_url": api.URL}))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	out := c.Do(ctx, []byte(`{"upstream":"api","path":"/trickle"}`))
	var r hostcall.Result
	json.Unmarshal(out, &r)
	wantErr(t, r, "unavailable", "the response of upstream api did not finish before the call's deadline (HTTP 200")
	select {
	case <-hungUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the host did not hang up on the trickling body")
	}
}
