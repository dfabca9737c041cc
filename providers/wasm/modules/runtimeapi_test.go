package modules_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/e2e/emulators/runtimeapi"
	"github.com/canvasapp/companion/providers/wasm"
)

const runtimeAPIToken = "rtapi_5e1d_module_test_token"

type runtimeAPIEnv struct {
	*env
	rt    *runtimeapi.Server
	srv   *httptest.Server
	clock *emulator.Clock
	acct  core.Account
}

// newRuntimeAPI starts the runtime-api emulator and an account pointing
// at it; runtime urls (path mode, on the emulator's own address) are
// allowed through the account's runtime_hosts override.
func newRuntimeAPI(t *testing.T, o runtimeapi.Options) *runtimeAPIEnv {
	e := newEnv(t, "runtimeapi")
	clock := clockStart()
	o.Token, o.Clock = runtimeAPIToken, clock
	rt := runtimeapi.New(o)
	srv := serve(t, rt)
	rt.SetBaseURL(srv.URL)
	acct := e.account(runtimeAPIToken, srv.URL, map[string]string{"image": "ghcr.io/openhands/agent-server:test", "runtime_hosts": "127.0.0.1"})
	return &runtimeAPIEnv{env: e, rt: rt, srv: srv, clock: clock, acct: acct}
}

// agentGet sends GET url+path with X-Session-API-Key key (if any).
func agentGet(t *testing.T, url, key, path string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url+path, nil)
	if key != "" {
		req.Header.Set("X-Session-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestRuntimeAPIDescribe(t *testing.T) {
	d := newRuntimeAPI(t, runtimeapi.Options{})
	describe(t, d.env, core.Capabilities{
		List: true, Suspend: true, SuspendKeepsFiles: true, ResumeSameIdentity: true, Delete: true, NativeIdlePause: true,
	}, "X-API-Key: {token}", "api_url", "image", "command", "working_dir", "runtime_hosts")
	info, _ := d.prov.Describe(context.Background())
	if !info.ProviderSessionKey {
		t.Fatal("the runtime-api issues the session keys, but the provider does not say so")
	}
	for _, c := range info.Config {
		if c.Description == "" {
			t.Errorf("config field %s has no description", c.Name)
		}
	}
}

// TestRuntimeAPILifecycle: start sends what the clients send and labels
// the runtime through its session id; a retried create is the same
// runtime; pause keeps the box, the url answers 503; resume keeps the box
// id but moves the key (the old one is refused); stop, then stop again.
func TestRuntimeAPILifecycle(t *testing.T) {
	ctx := context.Background()
	d := newRuntimeAPI(t, runtimeapi.Options{})
	ws := core.NewID("ws")
	spec := core.CreateSpec{WorkspaceID: ws, Name: "my project", AgentKey: "agent-key-from-companion",
		Options: map[string]string{"resource_factor": "2"}}
	b := d.create(d.acct, spec)
	if b.State != core.StateRunning || b.ID != "companion-"+d.acct.ID+"-"+ws {
		t.Fatalf("created %+v", b)
	}
	rt, ok := d.rt.Session(b.ID)
	if !ok || rt.Image != "ghcr.io/openhands/agent-server:test" || rt.Command != "openhands-agent-server --port 60000" ||
		rt.WorkingDir != "/workspace" || rt.Environment["COMPANION_WORKSPACE"] != ws || rt.Environment["OH_SESSION_API_KEYS_0"] != "agent-key-from-companion" {
		t.Fatalf("started runtime %+v", rt)
	}
	if again := d.create(d.acct, spec); again.ID != b.ID || len(d.rt.Runtimes()) != 1 {
		t.Fatalf("second create made %s (%d runtimes)", again.ID, len(d.rt.Runtimes()))
	}
	got := d.get(d.acct, b.ID)
	key1 := got.Key
	if got.State != core.StateRunning || key1 == "" || key1 != rt.SessionAPIKey {
		t.Fatalf("get: %+v", got)
	}
	ep, err := d.prov.(core.EndpointReporter).Endpoint(ctx, d.acct, b.ID)
	if err != nil {
		t.Fatal(d.check(err))
	}
	if ep.URL != d.srv.URL+"/"+rt.RuntimeID || len(ep.Headers) != 0 {
		t.Fatalf("endpoint %+v", ep)
	}
	if st := agentGet(t, ep.URL, key1, "/api/conversations"); st != 200 {
		t.Fatalf("agent-server with the box key: %d", st)
	}

	p := d.suspend(d.acct, b.ID)
	if p.State != core.StatePaused || p.PausedAt.IsZero() {
		t.Fatalf("suspended %+v", p)
	}
	d.suspend(d.acct, b.ID)
	if n := len(d.rt.Requests().Matching("POST", "/pause")); n != 1 {
		t.Fatalf("%d pause requests, want 1", n)
	}
	if st := agentGet(t, ep.URL, key1, "/api/conversations"); st != 503 {
		t.Fatalf("agent-server of a paused runtime: %d, want 503", st)
	}
	if _, err := d.prov.(core.EndpointReporter).Endpoint(ctx, d.acct, b.ID); !core.IsKind(err, core.KindConflict) {
		t.Fatalf("endpoint of a paused runtime: %v, want conflict", err)
	}

	r := d.resume(d.acct, b.ID)
	if r.ID != b.ID || r.State != core.StateRunning || r.Key == "" || r.Key == key1 {
		t.Fatalf("resumed %+v (key before %q)", r, key1)
	}
	if st := agentGet(t, ep.URL, key1, "/api/conversations"); st != 401 {
		t.Fatalf("the old key after resume: %d, want 401", st)
	}
	if st := agentGet(t, ep.URL, r.Key, "/api/conversations"); st != 200 {
		t.Fatalf("the new key after resume: %d", st)
	}
	if got := d.get(d.acct, b.ID); got.Key != r.Key {
		t.Fatal("get does not report the key resume made")
	}
	d.resume(d.acct, b.ID)
	if n := len(d.rt.Requests().Matching("POST", "/resume")); n != 1 {
		t.Fatalf("%d resume requests, want 1", n)
	}

	d.delete(d.acct, b.ID)
	if _, err := d.prov.Get(ctx, d.acct, b.ID); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	d.delete(d.acct, b.ID)
	if n := len(d.rt.Requests().Matching("POST", "/stop")); n != 1 {
		t.Fatalf("%d stop requests, want 1", n)
	}
	onlyAPI(t, d.rt.Requests().All(), "/start", "/list", "/sessions/", "/pause", "/resume", "/stop")
}

// TestRuntimeAPIListOnlyOwnRuntimes: /list spans every user of the key;
// the module lists only the runtimes this account started, and never acts
// on another user's.
func TestRuntimeAPIListOnlyOwnRuntimes(t *testing.T) {
	d := newRuntimeAPI(t, runtimeapi.Options{})
	other := d.rt.Seed(runtimeapi.Runtime{SessionID: "4f1c9a1e-other-user", User: "someone-else"})
	// Another companion account on the same key.
	otherAcct := d.rt.Seed(runtimeapi.Runtime{SessionID: "companion-acc_not_this_one-ws_x", User: "key-owner"})
	mine := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	paused := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	d.suspend(d.acct, paused.ID)
	gone := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	d.delete(d.acct, gone.ID)

	boxes := byID(t, d.list(d.acct))
	if len(boxes) != 2 || boxes[mine.ID].State != core.StateRunning || boxes[paused.ID].State != core.StatePaused {
		t.Fatalf("listed %+v; want only %s (running) and %s (paused)", boxes, mine.ID, paused.ID)
	}
	for _, b := range boxes {
		if b.Labels[core.LabelWorkspace] == "" || b.Key == "" {
			t.Fatalf("listed box %+v lacks its workspace label or key", b)
		}
	}
	for _, r := range d.rt.Requests().All() {
		if strings.Contains(r.Path, other.SessionID) || strings.Contains(r.Path, otherAcct.SessionID) {
			t.Fatalf("%s %s touched a runtime that is not this account's", r.Method, r.Path)
		}
	}
	for _, sid := range []string{other.SessionID, otherAcct.SessionID} {
		if r, _ := d.rt.Session(sid); r.Status != runtimeapi.StatusRunning || r.SessionAPIKey == "" || r.RestartCount != 0 {
			t.Fatalf("runtime %s that is not this account's changed: %+v", sid, r)
		}
	}
}

// TestRuntimeAPIKeyFromEnvironment: under the other reading of §1.1 (the
// runtime-api keeps the key given in the environment) the box reports
// companion's key until the first resume, which replaces it.
func TestRuntimeAPIKeyFromEnvironment(t *testing.T) {
	for _, envKey := range []bool{false, true} {
		d := newRuntimeAPI(t, runtimeapi.Options{EnvKey: envKey})
		b := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), AgentKey: "agent-key-from-companion"})
		if got := b.Key == "agent-key-from-companion"; got != envKey || b.Key == "" {
			t.Fatalf("env key honoured %v: box key is companion's: %v", envKey, got)
		}
		d.suspend(d.acct, b.ID)
		if r := d.resume(d.acct, b.ID); r.Key == "" || r.Key == b.Key || r.Key == "agent-key-from-companion" {
			t.Fatalf("env key honoured %v: resume kept the key", envKey)
		}
	}
}

// TestRuntimeAPIIdleReaper: the runtime-api pauses a runtime on its own
// (native idle pause); the module then reports it paused, and a resume
// brings it back with a new key.
func TestRuntimeAPIIdleReaper(t *testing.T) {
	d := newRuntimeAPI(t, runtimeapi.Options{IdleAfter: 20 * time.Minute})
	b := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	d.clock.Advance(21 * time.Minute)
	if got := d.get(d.acct, b.ID); got.State != core.StatePaused {
		t.Fatalf("after 21 idle minutes: %s, want paused", got.State)
	}
	if r := d.resume(d.acct, b.ID); r.State != core.StateRunning || r.Key == b.Key {
		t.Fatalf("resumed %+v", r)
	}
}

func TestRuntimeAPIErrors(t *testing.T) {
	ctx := context.Background()
	d := newRuntimeAPI(t, runtimeapi.Options{})
	d.rt.Faults().RateLimit(1, 9*time.Second)
	_, err := d.prov.List(ctx, d.acct)
	if ce := d.mustKind(err, core.KindRateLimited); ce.RetryAfter != 9*time.Second {
		t.Fatalf("retry after %v, want 9s", ce.RetryAfter)
	}
	d.rt.Faults().Add(emulator.Fault{Kind: emulator.FaultStatus, Status: 503, RetryAfter: 4 * time.Second})
	_, err = d.prov.List(ctx, d.acct)
	if ce := d.mustKind(err, core.KindUnavailable); ce.RetryAfter != 4*time.Second {
		t.Fatalf("retry after %v, want 4s", ce.RetryAfter)
	}
	// A wrong key is the token's fault.
	bad := d.account("not-the-key", d.srv.URL, map[string]string{"image": "x"})
	_, err = d.prov.List(ctx, bad)
	d.mustKind(err, core.KindUnauthorized)
	// No image anywhere: refused before any request.
	noImage := d.account(runtimeAPIToken, d.srv.URL, nil)
	n := len(d.rt.Requests().All())
	_, err = d.prov.Create(ctx, noImage, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	d.mustKind(err, core.KindInvalid)
	if len(d.rt.Requests().All()) != n {
		t.Fatal("a create without an image reached the API")
	}
	_, err = d.prov.Create(ctx, d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Options: map[string]string{"resource_factor": "3"}})
	d.mustKind(err, core.KindInvalid)
	_, err = d.prov.Create(ctx, d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Options: map[string]string{"snapshot": "x"}})
	d.mustKind(err, core.KindInvalid)
}

// TestRuntimeAPIHostileAnswers: a runtime-api (or something in front of
// it) answering garbage gives clear errors, never a crash or a box made
// up from nothing.
func TestRuntimeAPIHostileAnswers(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, "runtimeapi")
	var mode atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load().(string) {
		case "garbage":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"runtimes": [{"runtime_id": 7,`))
		case "html":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html><body>Welcome to nginx!</body></html>"))
		case "huge":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"runtimes":[{"session_id":"`))
			chunk := []byte(strings.Repeat("a", 1<<20))
			for range 20 { // 20 MiB, past the manifest's 16 MiB
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			w.Write([]byte(`"}]}`))
		case "error-html":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			w.Write([]byte("<html>Bad Gateway</html>"))
		case "no-runtime-id":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"status":"running","url":"https://x.runtime.all-hands.dev"}`))
		}
	}))
	t.Cleanup(srv.Close)
	acct := e.account(runtimeAPIToken, srv.URL, map[string]string{"image": "img"})
	for _, c := range []struct {
		mode string
		kind core.ErrorKind
		says string
	}{
		{"garbage", core.KindUnavailable, "cannot read"},
		{"html", core.KindUnavailable, "cannot read"},
		{"huge", "", ""},
		{"error-html", core.KindUnavailable, "HTTP 502"},
	} {
		mode.Store(c.mode)
		_, err := e.prov.List(ctx, acct)
		e.check(err)
		if err == nil {
			t.Fatalf("%s: list succeeded", c.mode)
		}
		if c.kind != "" && !core.IsKind(err, c.kind) {
			t.Fatalf("%s: %v (kind %s), want %s", c.mode, err, core.KindOf(err), c.kind)
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Fatalf("%s: %v does not say %q", c.mode, err, c.says)
		}
	}
	mode.Store("no-runtime-id")
	_, err := e.prov.Get(ctx, acct, "companion-"+acct.ID+"-ws_1")
	e.mustKind(err, core.KindUnavailable)
	_, err = e.prov.Create(ctx, acct, core.CreateSpec{WorkspaceID: "ws_1"})
	e.mustKind(err, core.KindUnavailable)
}

// withCallTimeout returns module's packed bytes repacked with its
// manifest's call budget (limits.call_timeout_ms) set to ms.
func withCallTimeout(t *testing.T, module string, ms int) []byte {
	t.Helper()
	raw, err := wasm.ManifestJSON(built[module])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	limits, _ := m["limits"].(map[string]any)
	if limits == nil {
		limits = map[string]any{}
		m["limits"] = limits
	}
	limits["call_timeout_ms"] = ms
	raw, _ = json.Marshal(m)
	packed, err := wasm.Pack(built[module], raw)
	if err != nil {
		t.Fatal(err)
	}
	return packed
}

// TestRuntimeAPISlowStream: a runtime-api (or something in front of it)
// that sends its headers, then trickles a body that never ends. Each call
// ends with a clear error within the module's call budget, the host
// hangs up on the trickle, and the next call works: never a hang nor a
// stuck module. The module is repacked with a short budget so the test
// does not wait the manifest's minute.
func TestRuntimeAPISlowStream(t *testing.T) {
	ctx := context.Background()
	e := newEnvOf(t, "runtimeapi", withCallTimeout(t, "runtimeapi", 1500))
	var trickle atomic.Bool
	trickle.Store(true)
	hungUp := make(chan string, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !trickle.Load() {
			w.Write([]byte(`{"runtimes":[],"total":0}`))
			return
		}
		w.Write([]byte(`{"runtimes":[`))
		w.(http.Flusher).Flush()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				hungUp <- r.Method + " " + r.URL.Path
				return
			case <-tick.C:
				if _, err := w.Write([]byte(" ")); err != nil {
					hungUp <- r.Method + " " + r.URL.Path
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	acct := e.account(runtimeAPIToken, srv.URL, map[string]string{"image": "img"})
	calls := []struct {
		what string
		call func() error
	}{
		{"list", func() error { _, err := e.prov.List(ctx, acct); return err }},
		{"get", func() error { _, err := e.prov.Get(ctx, acct, "companion-"+acct.ID+"-ws_1"); return err }},
		{"create", func() error { _, err := e.prov.Create(ctx, acct, core.CreateSpec{WorkspaceID: "ws_1"}); return err }},
	}
	for _, c := range calls {
		err := c.call()
		e.check(err)
		if !core.IsKind(err, core.KindUnavailable) {
			t.Fatalf("%s against a trickling body: %v (kind %q), want unavailable", c.what, err, core.KindOf(err))
		}
		// The host's request ends at the deadline ("the response of
		// upstream api did not finish before the call's deadline"), or
		// the sandbox stops the module at it ("did not finish list
		// within 1.5s"): which one comes first is a race, both say it.
		t.Logf("%s: %v", c.what, err)
		if msg := err.Error(); !strings.Contains(msg, "did not finish") {
			t.Fatalf("%s against a trickling body: %q does not say the call ran out of time", c.what, msg)
		}
		select {
		case <-hungUp:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the host did not hang up on the trickling body", c.what)
		}
	}
	trickle.Store(false)
	if _, err := e.prov.List(ctx, acct); e.check(err) != nil {
		t.Fatalf("list after the trickles: %v", err)
	}
}
