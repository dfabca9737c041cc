package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/cloudflare"
	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/digitalocean"
	"github.com/canvasapp/companion/e2e/emulators/e2b"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// A cloud farm is one provider's emulator (Daytona, E2B or DigitalOcean)
// with a real agent-server emulator process behind each box's port 8000:
// the provider's module reports the box's endpoint, companion reaches the
// box through the emulator's own proxy (Daytona's preview proxy, E2B's
// sandbox proxy, DigitalOcean's session ingress), and the agent-server
// answers from a directory that stands for the box's disk: it runs with
// EMULATOR_FS_ROOT=<box dir>, so the box's /workspace is
// <box dir>/workspace for every route. The process is started on the
// box's first proxied request with the agent-server key companion put in
// the box, and keeps running (and its files stay) across pause and resume.
//
//	f := newCloudFarm(t, "e2b")   // or "daytona", "digitalocean"
//	acct := f.account(p)          // an account on the farm in companion p
//	code, body := f.callBox(t, box, "GET", "/api/conversations/count")
//	f.requests()                  // "METHOD host path?query -> status", API and boxes alike

var (
	agentBinOnce sync.Once
	agentBin     string
	agentBinErr  error
)

// agentServerBin builds the agent-server emulator once per test binary.
func agentServerBin(t *testing.T) string {
	t.Helper()
	agentBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "companion-e2e-agentserver-")
		if err != nil {
			agentBinErr = err
			return
		}
		agentBin = filepath.Join(dir, "agentserver")
		cmd := exec.Command("go", "build", "-o", agentBin, "./agentserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentBinErr = fmt.Errorf("build the agent-server emulator: %v\n%s", err, out)
		}
	})
	if agentBinErr != nil {
		t.Fatal(agentBinErr)
	}
	return agentBin
}

// agentKeyEnv is where the Daytona and E2B modules put companion's
// agent-server key in the box's environment.
const agentKeyEnv = "OH_SESSION_API_KEYS_0"

// archiveFault is a reply the box's edge gives the archive route instead
// of the agent-server's, count times (429 and 503 with Retry-After).
type archiveFault struct {
	status     int
	retryAfter string
	count      int
}

// boxSetup is how one box's agent-server behaves; set it before the box's
// first proxied request.
type boxSetup struct {
	// key, when set, is the key the agent-server accepts instead of the
	// one companion put in the box (so it answers 401).
	key string
	// archiveAt points /workspace in archive requests elsewhere in the
	// box: "file" at /a-file (a regular file: 400, nothing to archive),
	// "missing" at /not-there (404).
	archiveAt string
	faults    []archiveFault
	// noSeed starts the agent-server without a seeded repository at
	// /workspace/repo (the test lays the workspace out itself).
	noSeed bool
	// noShell answers the bash routes 404, as a box without them would.
	noShell bool
	// serve, when set, answers in place of the agent-server process: a
	// stand-in for a route the agent-server emulator lacks (a WebSocket).
	serve http.Handler
}

// cloudFarm is one provider's emulator plus one agent-server process per
// box, with one ordered log of every request that reached either.
type cloudFarm struct {
	t        *testing.T
	provider string   // "daytona", "e2b" or "digitalocean"
	emu      emulated // the emulator in use, whichever it is
	dt       *daytona.Server
	eb       *e2b.Server
	do       *digitalocean.Server
	cf       *cloudflare.Server
	srv      *httptest.Server
	root     string
	bin      string

	mu    sync.Mutex
	log   []string // "METHOD host path?query -> status", in completion order
	procs map[string]*url.URL
	setup map[string]*boxSetup
	// refuse answers provider API requests whose path ends with a key
	// with that status instead of the emulator's answer.
	refuse map[string]int
	// noSeed is boxSetup.noSeed for every box (set before any starts).
	noSeed bool
	// gate holds one armed provider API request (gate.arm), so a test
	// can kill companion exactly there; unarmed it passes all through.
	gate *apiGate
}

var agentAddrRE = regexp.MustCompile(`addr=(\S+)`)

// farmProviders are the providers newCloudFarm serves.
var farmProviders = []string{"daytona", "e2b", "digitalocean", "cloudflare"}

// newCloudFarm starts provider's emulator on a wall clock with instant
// transitions, its box proxy on localhost names of the farm's port.
func newCloudFarm(t *testing.T, provider string) *cloudFarm {
	t.Helper()
	f := &cloudFarm{t: t, provider: provider, root: t.TempDir(), bin: agentServerBin(t),
		procs: map[string]*url.URL{}, setup: map[string]*boxSetup{}}
	clock := emulator.NewWallClock()
	switch provider {
	case "daytona":
		f.dt = daytona.New(daytona.Options{Token: cloudToken, Clock: clock, Delays: &daytona.Delays{}, AgentServer: f.agent})
		f.emu = f.dt
	case "e2b":
		f.eb = e2b.New(e2b.Options{Token: cloudToken, Clock: clock, AgentServer: f.agent})
		f.emu = f.eb
	case "digitalocean":
		f.do = digitalocean.New(digitalocean.Options{Token: cloudToken, Clock: clock, Delays: &digitalocean.Delays{}, AgentServer: f.agent})
		f.emu = f.do
	case "cloudflare":
		// Each container's "/" is a directory under the farm's root
		// named by the container's id, which is what AgentServer and
		// the farm's boxes are keyed by: a sleep that loses the files
		// moves the sandbox to a new, empty directory.
		f.cf = cloudflare.New(cloudflare.Options{Token: cloudToken, Clock: clock, Root: f.root, AgentServer: f.agent})
		f.emu = f.cf
	default:
		t.Fatalf("no farm for provider %q (want one of %v)", provider, farmProviders)
	}
	inner := f.emu.Handler()
	f.gate = &apiGate{next: inner, reached: make(chan string, 1)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &codeWriter{ResponseWriter: w, code: 200}
		if code := f.refused(r.URL.Path); code != 0 {
			http.Error(sw, `{"message":"refused by the test"}`, code)
		} else {
			f.gate.ServeHTTP(sw, r)
		}
		f.mu.Lock()
		f.log = append(f.log, fmt.Sprintf("%s %s %s -> %d", r.Method, r.Host, r.URL.RequestURI(), sw.code))
		f.mu.Unlock()
	}))
	t.Cleanup(func() { f.emu.Close(); f.srv.Close() })
	domain := "localhost:" + f.port()
	switch provider {
	case "daytona":
		f.dt.SetProxy("http", domain)
	case "e2b":
		f.eb.SetDomain(domain)
	case "digitalocean":
		f.do.SetIngressDomain("http", domain)
	case "cloudflare":
		f.cf.SetDomain(domain)
	}
	return f
}

// port is the farm server's port; box hosts are *.localhost:port.
func (f *cloudFarm) port() string {
	u, _ := url.Parse(f.srv.URL)
	return u.Port()
}

// codeWriter remembers the status for the farm's log. It passes Flush and
// Hijack on, so streamed downloads and WebSocket upgrades get through.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(c int) { w.code = c; w.ResponseWriter.WriteHeader(c) }

func (w *codeWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// Hijack hands the connection over for a protocol switch, logged as 101.
func (w *codeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.code = http.StatusSwitchingProtocols
	}
	return c, brw, err
}

func (w *codeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// account adds an account on the farm to p and returns its id: the
// provider's API on the farm, and the module's endpoint-host override
// allowing the farm's *.localhost box hosts.
func (f *cloudFarm) account(p *proc) string {
	cfg := map[string]string{"api_url": f.srv.URL}
	switch f.provider {
	case "daytona":
		cfg["api_url"] += "/api"
		cfg["proxy_hosts"] = "*.localhost"
	case "e2b":
		cfg["sandbox_hosts"] = "*.localhost"
	case "digitalocean":
		cfg["ingress_hosts"] = "*.localhost"
	case "cloudflare":
		cfg["tunnel_hosts"] = "*.localhost"
	}
	var acct struct{ Account struct{ ID string } }
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": f.provider, "label": "farm", "config": cfg,
		"credentials": map[string]string{"token": cloudToken},
	}, &acct)
	return acct.Account.ID
}

// boxKey is the agent-server key companion put in the box: Daytona's
// sandbox env and E2B's envVars carry it. DigitalOcean's module sets none
// (a session has no env; Canvas runs its DO guests without one, the
// ingress being the auth boundary: agent-server.md §8), so a DigitalOcean
// box's agent-server takes any key.
func (f *cloudFarm) boxKey(id string) (string, error) {
	switch f.provider {
	case "daytona":
		if sb, ok := f.dt.Sandbox(id); ok {
			return sb.Env[agentKeyEnv], nil
		}
	case "e2b":
		if sb, ok := f.eb.Sandbox(id); ok {
			return sb.EnvVars[agentKeyEnv], nil
		}
	case "digitalocean":
		if _, ok := f.do.Session(id); ok {
			return "", nil
		}
	case "cloudflare":
		// Boxes are containers here; the key is the one the start
		// script gave the agent-server.
		if c, ok := f.cf.ContainerByID(id); ok {
			return c.AgentKey, nil
		}
		if c, ok := f.cf.Container(id); ok {
			return c.AgentKey, nil
		}
	}
	return "", fmt.Errorf("no %s box %s", f.provider, id)
}

// gone reports whether the provider no longer has the box.
func (f *cloudFarm) gone(box string) bool {
	switch f.provider {
	case "daytona":
		sb, ok := f.dt.Sandbox(box)
		return !ok || sb.State == daytona.StateDestroyed
	case "e2b":
		_, ok := f.eb.Sandbox(box)
		return !ok
	case "cloudflare":
		_, ok := f.cf.Container(box)
		return !ok
	default:
		s, ok := f.do.Session(box)
		return !ok || s.Status == digitalocean.StatusDestroyed || s.Status == digitalocean.StatusDestroying
	}
}

// endpoint is where a client reaches the box's agent-server through the
// provider's proxy, as the module would report it: the URL and the
// headers the proxy wants (DigitalOcean's: the account token).
func (f *cloudFarm) endpoint(box string) (string, http.Header, error) {
	var ep emulator.Endpoint
	var err error
	switch f.provider {
	case "daytona":
		ep, err = f.dt.Endpoint(box, 8000)
	case "e2b":
		ep, err = f.eb.Endpoint(box, 8000)
	case "cloudflare":
		var ok bool
		if ep, ok = f.cf.Endpoint(box); !ok {
			err = fmt.Errorf("cloudflare: sandbox %s has no tunnel to port 8000", box)
		}
	default:
		ep, err = f.do.Endpoint(box)
		ep.Headers = map[string]string{"Authorization": "Bearer " + cloudToken}
	}
	if err != nil {
		return "", nil, err
	}
	h := http.Header{}
	for k, v := range ep.Headers {
		h.Set(k, v)
	}
	return ep.URL, h, nil
}

// callBox sends a request to the box's agent-server through the provider's
// proxy, with the proxy's credentials and the box's agent-server key, and
// returns the status and body.
func (f *cloudFarm) callBox(t *testing.T, box, method, path string) (int, []byte) {
	t.Helper()
	base, hdr, err := f.endpoint(box)
	if err != nil {
		t.Fatal(err)
	}
	key, err := f.boxKey(box)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		hdr.Set("X-Session-API-Key", key)
	}
	return f.via(t, base, hdr, method, path)
}

// via sends a request to the farm addressed to base's host (a box proxy's
// *.localhost name, which need not resolve) with hdr.
func (f *cloudFarm) via(t *testing.T, base string, hdr http.Header, method, path string) (int, []byte) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = u.Host
	req.Header = hdr.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s via %s: %v", method, path, u.Host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// refuseAt makes provider API requests whose path ends with suffix
// answer status (0: answer normally again).
func (f *cloudFarm) refuseAt(suffix string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse == nil {
		f.refuse = map[string]int{}
	}
	f.refuse[suffix] = status
}

func (f *cloudFarm) refused(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for suffix, code := range f.refuse {
		if code != 0 && strings.HasSuffix(path, suffix) {
			return code
		}
	}
	return 0
}

// box returns the setup of a box, made on first use.
func (f *cloudFarm) box(id string) *boxSetup {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.setup[id]
	if b == nil {
		b = &boxSetup{}
		f.setup[id] = b
	}
	return b
}

// boxDir is the directory standing for the box's "/".
func (f *cloudFarm) boxDir(id string) string { return filepath.Join(f.root, id) }

// diskOf is the directory standing for box's "/" now: the box's own, or
// at Cloudflare its sandbox's current container's (none: a path that
// does not exist).
func (f *cloudFarm) diskOf(box string) string {
	if f.cf == nil {
		return f.boxDir(box)
	}
	if c, ok := f.cf.Container(box); ok {
		return f.boxDir(c.ID)
	}
	return f.boxDir("no-container-" + box)
}

// agent is the handler behind a box's port 8000 (the emulators'
// AgentServer): faults, the archiveAt redirection, then the box's own
// agent-server process (or its stand-in).
func (f *cloudFarm) agent(id string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		b := f.setup[id]
		var serve http.Handler
		noShell := false
		if b != nil {
			serve, noShell = b.serve, b.noShell
		}
		f.mu.Unlock()
		if serve != nil {
			serve.ServeHTTP(w, r)
			return
		}
		target, err := f.process(id)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if noShell && strings.HasPrefix(r.URL.Path, "/api/bash/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"detail":"Not Found"}`)
			return
		}
		if r.URL.Path == "/api/file/archive" {
			f.mu.Lock()
			b := f.setup[id]
			var fault *archiveFault
			if b != nil && len(b.faults) > 0 {
				fault = &b.faults[0]
				if fault.count--; fault.count <= 0 {
					b.faults = b.faults[1:]
				}
			}
			at := ""
			if b != nil {
				at = b.archiveAt
			}
			f.mu.Unlock()
			if fault != nil {
				if fault.retryAfter != "" {
					w.Header().Set("Retry-After", fault.retryAfter)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(fault.status)
				io.WriteString(w, `{"detail":"injected by the test"}`)
				return
			}
			q := r.URL.Query()
			if p := q.Get("path"); at != "" && (p == "/workspace" || strings.HasPrefix(p, "/workspace/")) {
				base := map[string]string{"file": "/a-file", "missing": "/not-there"}[at]
				q.Set("path", base+strings.TrimPrefix(p, "/workspace"))
				r.URL.RawQuery = q.Encode()
			}
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	})
}

// process starts the box's agent-server on first use, with the key
// companion put in the box (or the box's override).
func (f *cloudFarm) process(id string) (*url.URL, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u := f.procs[id]; u != nil {
		return u, nil
	}
	key, err := f.boxKey(id)
	if err != nil {
		return nil, err
	}
	if b := f.setup[id]; b != nil && b.key != "" {
		key = b.key
	}
	dir := f.boxDir(id)
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "a-file"), []byte("not a directory"), 0o644); err != nil {
		return nil, err
	}
	// The box's "/" is dir: the process runs there (conversations go to
	// /workspace/conversations, as in the box image) and takes every path
	// under it.
	cmd := exec.Command(f.bin)
	cmd.Dir = dir
	cmd.Env = []string{"EMULATOR_LISTEN=127.0.0.1:0", "EMULATOR_PURE_GIT=1", "EMULATOR_FS_ROOT=" + dir}
	if key != "" {
		cmd.Env = append(cmd.Env, agentKeyEnv+"="+key)
	}
	if b := f.setup[id]; !f.noSeed && (b == nil || !b.noSeed) {
		cmd.Env = append(cmd.Env, "EMULATOR_SEED_REPO=/workspace/repo")
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the agent-server of %s: %w", id, err)
	}
	f.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := agentAddrRE.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), "listening") {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case a := <-addr:
		u, _ := url.Parse("http://" + a)
		f.procs[id] = u
		return u, nil
	case <-time.After(20 * time.Second):
		return nil, fmt.Errorf("agent-server of %s did not start", id)
	}
}

// requests returns the log so far.
func (f *cloudFarm) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// converse starts a conversation in the box through its agent-server, so
// its export has a trajectory.
func (f *cloudFarm) converse(t *testing.T, box string) {
	t.Helper()
	u, err := f.process(box)
	if err != nil {
		t.Fatal(err)
	}
	key, err := f.boxKey(box)
	if err != nil {
		t.Fatal(err)
	}
	startConversation(t, u.String(), key, "before delete")
}
