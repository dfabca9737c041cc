package modules_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/emulators/cloudflare"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

const cloudflareToken = "cf_bridge_4a7e_module_test_key"

type cloudflareEnv struct {
	*env
	cf    *cloudflare.Server
	srv   *httptest.Server
	clock *emulator.Clock
	acct  core.Account
}

// newCloudflare starts the bridge emulator and an account pointing at
// it; its tunnels are *.localhost names of the emulator's port, allowed
// through the account's tunnel_hosts override.
func newCloudflare(t *testing.T, o cloudflare.Options) *cloudflareEnv {
	e := newEnv(t, "cloudflare")
	clock := clockStart()
	o.Token, o.Clock, o.Root = cloudflareToken, clock, t.TempDir()
	cf := cloudflare.New(o)
	srv := serve(t, cf)
	cf.SetDomain("localhost:" + port(srv))
	acct := e.account(cloudflareToken, srv.URL, map[string]string{"tunnel_hosts": "*.localhost"})
	return &cloudflareEnv{env: e, cf: cf, srv: srv, clock: clock, acct: acct}
}

func TestCloudflareDescribe(t *testing.T) {
	d := newCloudflare(t, cloudflare.Options{})
	// No list (nothing to adopt), no pause (a sleep loses the files).
	describe(t, d.env, core.Capabilities{Delete: true}, "Authorization: Bearer {token}", "api_url", "agent_command", "tunnel_hosts")
	info, _ := d.prov.Describe(context.Background())
	if len(info.Clocks) != 1 || info.Clocks[0].Loses != core.ClockLosesFiles || info.Clocks[0].Starts != core.ClockStartsIdle ||
		info.Clocks[0].After != 10*time.Minute {
		t.Fatalf("clocks %+v, want sleep_wipe: idle 10m loses files", info.Clocks)
	}
}

// TestCloudflareLifecycle: create starts the agent-server with
// companion's key in the sandbox companion names after the workspace; a
// retried create finds it running; get sends nothing (no status read of
// the bridge is free of side effects); the endpoint is the tunnel to port
// 8000; pause is refused with the reason; delete destroys the container,
// and again succeeds.
func TestCloudflareLifecycle(t *testing.T) {
	ctx := context.Background()
	d := newCloudflare(t, cloudflare.Options{})
	ws := core.NewID("ws")
	spec := core.CreateSpec{WorkspaceID: ws, Name: "my project", AgentKey: "agent-key-from-companion"}
	b := d.create(d.acct, spec)
	if b.State != core.StateRunning || b.URL != "" {
		t.Fatalf("created %+v", b)
	}
	c, ok := d.cf.Container(b.ID)
	if !ok || !c.Agent || c.AgentKey != "agent-key-from-companion" {
		t.Fatalf("container after create: %+v %v", c, ok)
	}
	if again := d.create(d.acct, spec); again.ID != b.ID {
		t.Fatalf("second create made %s besides %s", again.ID, b.ID)
	}
	if c2, _ := d.cf.Container(b.ID); c2.ID != c.ID {
		t.Fatal("a second create started a second container")
	}
	// Another account's create for the same workspace id is another sandbox.
	other := d.account(cloudflareToken, d.srv.URL, map[string]string{"tunnel_hosts": "*.localhost"})
	if ob := d.create(other, spec); ob.ID == b.ID {
		t.Fatal("two accounts share a sandbox id")
	}

	n := len(d.cf.Requests().All())
	for range 3 {
		if g := d.get(d.acct, b.ID); g.State != core.StateRunning || g.Labels[core.LabelWorkspace] != ws {
			t.Fatalf("get: %+v", g)
		}
	}
	if after := d.cf.Requests().All(); len(after) != n {
		t.Fatalf("get sent %v: any /v1/sandbox/:id call starts a container", since(after, n))
	}
	_, err := d.prov.Get(ctx, other, b.ID)
	d.mustKind(err, core.KindNotFound)
	_, err = d.prov.Get(ctx, d.acct, "UPPER")
	d.mustKind(err, core.KindNotFound)

	ep, err := d.prov.(core.EndpointReporter).Endpoint(ctx, d.acct, b.ID)
	if err != nil {
		t.Fatal(d.check(err))
	}
	if want, _ := d.cf.Endpoint(b.ID); ep.URL != want.URL || !strings.HasSuffix(ep.URL, ".localhost:"+port(d.srv)) {
		t.Fatalf("endpoint %+v, want the tunnel %s", ep, want.URL)
	}

	_, err = d.prov.Suspend(ctx, d.acct, b.ID)
	if ce := d.mustKind(err, core.KindInvalid); !strings.Contains(ce.Message, "loses its files") {
		t.Fatalf("suspend: %v", err)
	}
	d.delete(d.acct, b.ID)
	if _, ok := d.cf.Container(b.ID); ok || d.cf.Destroyed(b.ID) != 1 {
		t.Fatal("the container survived the delete")
	}
	d.delete(d.acct, b.ID)
	d.delete(d.acct, "neverexisted") // not this account's: no request
	for _, r := range d.cf.Requests().All() {
		if strings.Contains(r.Path, "neverexisted") {
			t.Fatalf("%s %s: a delete of an id companion never made reached the bridge", r.Method, r.Path)
		}
	}
}

// viaTunnel sends GET path to a tunnel url (a *.localhost name, which
// need not resolve) by dialling the emulator with the tunnel's Host.
func viaTunnel(t *testing.T, srv *httptest.Server, tunnel, path string) int {
	t.Helper()
	u, err := url.Parse(tunnel)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	req.Host = u.Host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func port(srv *httptest.Server) string {
	a := srv.Listener.Addr().String()
	return a[strings.LastIndex(a, ":")+1:]
}

// TestCloudflareSleep: past sleepAfter without a request the container
// sleeps; the next call gets a fresh one, without the agent-server. Both
// readings of the docs are run: files lost (current) and kept (older).
// Either way get still sends nothing and reports what companion knows,
// and a create (a retried one, say) starts the agent-server again.
func TestCloudflareSleep(t *testing.T) {
	for _, keep := range []bool{false, true} {
		name := map[bool]string{false: "files lost", true: "files kept"}[keep]
		t.Run(name, func(t *testing.T) {
			d := newCloudflare(t, cloudflare.Options{SleepKeepsFiles: keep})
			spec := core.CreateSpec{WorkspaceID: core.NewID("ws"), AgentKey: "k1"}
			b := d.create(d.acct, spec)
			first, _ := d.cf.Container(b.ID)
			if err := os.WriteFile(filepath.Join(d.cf.Dir(first.ID), "workspace", "work.txt"), []byte("work"), 0o644); err != nil {
				t.Fatal(err)
			}
			d.clock.Advance(cloudflare.DefaultSleepAfter + time.Second)
			if _, ok := d.cf.Container(b.ID); ok || d.cf.Sleeps() != 1 {
				t.Fatal("the container did not sleep")
			}
			n := len(d.cf.Requests().All())
			if g := d.get(d.acct, b.ID); g.State != core.StateRunning {
				t.Fatalf("get after the sleep: %+v", g)
			}
			if len(d.cf.Requests().All()) != n {
				t.Fatal("get after the sleep reached the bridge (and would have started a container)")
			}
			ep, err := d.prov.(core.EndpointReporter).Endpoint(context.Background(), d.acct, b.ID)
			if err != nil {
				t.Fatal(d.check(err))
			}
			second, _ := d.cf.Container(b.ID)
			if second.ID == first.ID || second.Agent {
				t.Fatalf("after the sleep: %+v, want a fresh container without the agent-server", second)
			}
			if st := viaTunnel(t, d.srv, ep.URL, "/server_info"); st != http.StatusBadGateway {
				t.Fatalf("the fresh container's tunnel answered %d, want 502 (no agent-server)", st)
			}
			_, err = os.Stat(filepath.Join(d.cf.Dir(second.ID), "workspace", "work.txt"))
			if kept := err == nil; kept != keep {
				t.Fatalf("work.txt kept across the sleep: %v, want %v", kept, keep)
			}
			d.create(d.acct, spec)
			if c, _ := d.cf.Container(b.ID); !c.Agent || c.ID != second.ID {
				t.Fatalf("create after the sleep: %+v", c)
			}
		})
	}
}

// TestCloudflareErrors: the bridge's own answers become clear errors.
func TestCloudflareErrors(t *testing.T) {
	ctx := context.Background()
	d := newCloudflare(t, cloudflare.Options{MaxInstances: 1})
	bad := d.account("not-the-key", d.srv.URL, nil)
	_, err := d.prov.Create(ctx, bad, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	if ce := d.mustKind(err, core.KindUnauthorized); !strings.Contains(ce.Message, "Unauthorized") {
		t.Fatalf("wrong key: %v", err)
	}
	d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	_, err = d.prov.Create(ctx, d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	if ce := d.mustKind(err, core.KindUnavailable); !strings.Contains(ce.Message, "capacity_exceeded") {
		t.Fatalf("full pool: %v", err)
	}
	noURL := d.account(cloudflareToken, "", nil)
	_, err = d.prov.Create(ctx, noURL, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	if ce := d.mustKind(err, core.KindInvalid); !strings.Contains(ce.Message, "api_url") {
		t.Fatalf("no Worker URL: %v", err)
	}
	_, err = d.prov.Create(ctx, d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Options: map[string]string{"image": "x"}})
	if ce := d.mustKind(err, core.KindInvalid); !strings.Contains(ce.Message, "no create options") {
		t.Fatalf("create with an option: %v", err)
	}
	_, err = d.prov.Create(ctx, d.acct, core.CreateSpec{WorkspaceID: strings.Repeat("w", 100)})
	d.mustKind(err, core.KindInvalid)
	_, err = d.prov.Create(ctx, d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), AgentKey: "it's"})
	d.mustKind(err, core.KindInvalid)
	quoted := d.account(cloudflareToken, d.srv.URL, map[string]string{"agent_command": "agent --name 'x'"})
	_, err = d.prov.Create(ctx, quoted, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	d.mustKind(err, core.KindInvalid)
}

// TestCloudflareHostileAnswers: something answering in place of the
// bridge with garbage gives clear errors, never a crash or a box made up.
func TestCloudflareHostileAnswers(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, "cloudflare")
	var mode atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load().(string) {
		case "html":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html><body>Welcome to nginx!</body></html>"))
		case "garbage-sse":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("event: stdout\ndata: %%%not base64%%%\n\n"))
		case "bad-exit":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("event: exit\ndata: {\"exit_code\": \"zero\"\n\n"))
		case "cut":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("event: stdout\ndata: aGVsbG8=\n\n"))
		case "exec-error":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("event: error\ndata: {\"error\":\"container crashed\",\"code\":\"exec_transport_error\"}\n\n"))
		case "exit-1":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("event: stderr\ndata: " + "c2g6IG9wZW5oYW5kcy1hZ2VudC1zZXJ2ZXI6IG5vdCBmb3VuZA==" + "\n\nevent: exit\ndata: {\"exit_code\":127}\n\n"))
		case "huge":
			w.Header().Set("Content-Type", "text/event-stream")
			chunk := []byte("event: stdout\ndata: " + strings.Repeat("QUFB", 1<<16) + "\n\n")
			for range 64 { // past the manifest's 1 MiB
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "error-html":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			w.Write([]byte("<html>Bad Gateway</html>"))
		case "exit-0":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("event: exit\ndata: {\"exit_code\":0}\n\n"))
		case "tunnel-garbage":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"url": 7`))
		case "tunnel-nourl":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"id":"t1","port":8000}`))
		}
	}))
	t.Cleanup(srv.Close)
	acct := e.account(cloudflareToken, srv.URL, nil)
	for _, c := range []struct {
		mode string
		kind core.ErrorKind
		says string
	}{
		{"html", core.KindUnavailable, "not an event stream"},
		{"garbage-sse", core.KindUnavailable, "not base64"},
		{"bad-exit", core.KindUnavailable, "exit_code"},
		{"cut", core.KindUnavailable, "ended before"},
		{"exec-error", core.KindUnavailable, "container crashed"},
		{"exit-1", core.KindUnavailable, "not found"},
		{"huge", "", ""},
		{"error-html", core.KindUnavailable, "HTTP 502"},
	} {
		mode.Store(c.mode)
		b, err := e.prov.Create(ctx, acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})
		e.check(err)
		if err == nil {
			t.Fatalf("%s: create succeeded with %+v", c.mode, b)
		}
		if c.kind != "" && !core.IsKind(err, c.kind) {
			t.Fatalf("%s: %v (kind %s), want %s", c.mode, err, core.KindOf(err), c.kind)
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Fatalf("%s: %v does not say %q", c.mode, err, c.says)
		}
	}
	mode.Store("exit-0")
	b := e.create(acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	for _, c := range []struct{ mode, says string }{
		{"tunnel-garbage", "cannot read"},
		{"tunnel-nourl", "without a usable url"},
		{"html", "cannot read"},
	} {
		mode.Store(c.mode)
		_, err := e.prov.(core.EndpointReporter).Endpoint(ctx, acct, b.ID)
		e.check(err)
		if !core.IsKind(err, core.KindUnavailable) || !strings.Contains(err.Error(), c.says) {
			t.Fatalf("endpoint against %s: %v, want unavailable saying %q", c.mode, err, c.says)
		}
	}
}

// TestCloudflareSlowStream: an exec stream that sends its headers and
// then trickles forever ends with a clear error within the call budget,
// and the next call works.
func TestCloudflareSlowStream(t *testing.T) {
	ctx := context.Background()
	e := newEnvOf(t, "cloudflare", withCallTimeout(t, "cloudflare", 1500))
	var trickle atomic.Bool
	trickle.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if !trickle.Load() {
			w.Write([]byte("event: exit\ndata: {\"exit_code\":0}\n\n"))
			return
		}
		w.(http.Flusher).Flush()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				if _, err := w.Write([]byte(": keep-alive\n")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	acct := e.account(cloudflareToken, srv.URL, nil)
	_, err := e.prov.Create(ctx, acct, core.CreateSpec{WorkspaceID: "ws_1"})
	e.check(err)
	if !core.IsKind(err, core.KindUnavailable) || !strings.Contains(err.Error(), "did not finish") {
		t.Fatalf("create against a trickling stream: %v (kind %q), want unavailable, out of time", err, core.KindOf(err))
	}
	trickle.Store(false)
	if _, err := e.prov.Create(ctx, acct, core.CreateSpec{WorkspaceID: "ws_1"}); e.check(err) != nil {
		t.Fatalf("create after the trickle: %v", err)
	}
}
