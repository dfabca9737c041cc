package modules_test

// The first-party modules are tested the way companion runs them: built by
// scripts/build-modules.sh, loaded into a real wasm.Host, with the token in
// the real OS keyring, talking to the e2e emulator of their provider's API
// over HTTP, and driven only through core.Provider.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/providers/wasm"
	"github.com/canvasapp/companion/providers/wasm/modules"
	"github.com/canvasapp/companion/secrets"
)

var (
	built    = map[string][]byte{} // module name -> packed bytes from dist/
	cacheDir string                // compile cache shared by the tests' hosts
)

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		code = 1
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	// The script is what `make build` runs; it is a no-op when dist/ is
	// up to date. The test binary's own embedded copy may predate it, so
	// the tests read the fresh files from disk.
	cmd := exec.Command("../../../scripts/build-modules.sh")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 1, fmt.Errorf("scripts/build-modules.sh: %v\n%s", err, out)
	}
	for _, name := range []string{"daytona", "e2b", "digitalocean", "runtimeapi", "cloudflare"} {
		b, err := os.ReadFile(filepath.Join("dist", name+".wasm"))
		if err != nil {
			return 1, err
		}
		built[name] = b
	}
	dir, err := os.MkdirTemp("", "companion-modules-test-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	cacheDir = filepath.Join(dir, "cache")
	return m.Run(), nil
}

// logBuf collects a host's log output.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newKeyring returns the real OS keyring under a namespace unique to the
// test. Without a reachable keyring the test is skipped, unless
// COMPANION_REQUIRE_KEYRING=1 (make test, CI) makes that a failure.
func newKeyring(t *testing.T) *secrets.Keyring {
	t.Helper()
	k := &secrets.Keyring{Namespace: core.NewID("test")}
	testsupport.NeedKeyring(t, k)
	return k
}

// env is one module loaded into a host, with accounts whose tokens are in
// the keyring, and the token values that must never show up anywhere.
type env struct {
	t       *testing.T
	module  string
	host    *wasm.Host
	prov    core.Provider
	keyring *secrets.Keyring
	logs    *logBuf
	secrets []string
}

func newEnv(t *testing.T, module string) *env {
	t.Helper()
	return newEnvOf(t, module, built[module])
}

// newEnvOf is newEnv with the module's packed bytes given (a first-party
// module repacked with another manifest, say).
func newEnvOf(t *testing.T, module string, packed []byte) *env {
	t.Helper()
	e := &env{t: t, module: module, keyring: newKeyring(t), logs: &logBuf{}}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	host, err := wasm.New(wasm.Config{CacheDir: cacheDir, Credentials: wasm.FromSecrets(e.keyring), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		host.Close(context.Background())
		for _, s := range e.secrets {
			if strings.Contains(e.logs.String(), s) {
				t.Errorf("a token appears in the host's log output")
			}
		}
	})
	a, err := host.LoadEmbedded(packed)
	if err != nil {
		t.Fatal(err)
	}
	e.host, e.prov = host, a
	return e
}

// account stores token in the keyring for a new account of the module
// whose API override points at apiURL.
func (e *env) account(token, apiURL string, config map[string]string) core.Account {
	e.t.Helper()
	ctx := context.Background()
	acct := core.Account{ID: core.NewID("acc"), Provider: e.module, Label: "test", Config: map[string]string{"api_url": apiURL}, Credentials: []string{"token"}}
	for k, v := range config {
		acct.Config[k] = v
	}
	key := core.CredentialKey(acct.ID, "token")
	if err := e.keyring.Set(ctx, key, token); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.keyring.Delete(context.Background(), key) })
	e.secrets = append(e.secrets, token)
	return acct
}

// check fails the test if err carries a token; it returns err.
func (e *env) check(err error) error {
	e.t.Helper()
	if err == nil {
		return nil
	}
	for _, s := range e.secrets {
		if strings.Contains(err.Error(), s) {
			e.t.Fatalf("a token appears in an error: %v", err)
		}
	}
	return err
}

// mustKind asserts err has kind k and returns it as a *core.Error.
func (e *env) mustKind(err error, k core.ErrorKind) *core.Error {
	e.t.Helper()
	e.check(err)
	if !core.IsKind(err, k) {
		e.t.Fatalf("got %v (kind %q), want kind %q", err, core.KindOf(err), k)
	}
	ce, _ := err.(*core.Error)
	return ce
}

func (e *env) list(acct core.Account) []core.Box {
	e.t.Helper()
	boxes, err := e.prov.List(context.Background(), acct)
	if e.check(err) != nil {
		e.t.Fatalf("list: %v", err)
	}
	return boxes
}

func (e *env) get(acct core.Account, id string) core.Box {
	e.t.Helper()
	b, err := e.prov.Get(context.Background(), acct, id)
	if e.check(err) != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return b
}

func (e *env) create(acct core.Account, spec core.CreateSpec) core.Box {
	e.t.Helper()
	b, err := e.prov.Create(context.Background(), acct, spec)
	if e.check(err) != nil {
		e.t.Fatalf("create: %v", err)
	}
	if b.Labels[core.LabelWorkspace] != spec.WorkspaceID {
		e.t.Fatalf("created box %s has labels %v, want %s=%s", b.ID, b.Labels, core.LabelWorkspace, spec.WorkspaceID)
	}
	return b
}

func (e *env) suspend(acct core.Account, id string) core.Box {
	e.t.Helper()
	b, err := e.prov.Suspend(context.Background(), acct, id)
	if e.check(err) != nil {
		e.t.Fatalf("suspend %s: %v", id, err)
	}
	return b
}

func (e *env) resume(acct core.Account, id string) core.Box {
	e.t.Helper()
	b, err := e.prov.Resume(context.Background(), acct, id)
	if e.check(err) != nil {
		e.t.Fatalf("resume %s: %v", id, err)
	}
	return b
}

func (e *env) delete(acct core.Account, id string) {
	e.t.Helper()
	if err := e.check(e.prov.Delete(context.Background(), acct, id)); err != nil {
		e.t.Fatalf("delete %s: %v", id, err)
	}
}

// serve runs an emulator handler; closers (the emulator's Close, which
// ends held requests) run before the server shuts down.
func serve(t *testing.T, h interface {
	Handler() http.Handler
	Close()
}) *httptest.Server {
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	return srv
}

// clockStart is where the emulators' frozen clocks start: in the recent
// past, so that emulated times are never in the module's future.
func clockStart() *emulator.Clock {
	return emulator.NewFakeClock(time.Now().Add(-3 * time.Hour).Truncate(time.Second))
}

// byID indexes boxes and fails on duplicates.
func byID(t *testing.T, boxes []core.Box) map[string]core.Box {
	t.Helper()
	m := map[string]core.Box{}
	for _, b := range boxes {
		if _, dup := m[b.ID]; dup {
			t.Fatalf("box %s listed twice", b.ID)
		}
		m[b.ID] = b
	}
	return m
}

// noWake asserts that since mark no request in log touched box id other
// than with GET: reading a paused box through the provider's API must not
// start, resume or otherwise act on it.
func noWake(t *testing.T, log []emulator.Request, id string) {
	t.Helper()
	for _, r := range log {
		if strings.Contains(r.Path, id) && r.Method != "GET" {
			t.Fatalf("%s %s acted on the paused box", r.Method, r.Path)
		}
	}
}

// onlyAPI asserts every request the module made stayed under the
// provider API's path prefixes (none reached a box-internal route).
func onlyAPI(t *testing.T, log []emulator.Request, prefixes ...string) {
	t.Helper()
	if len(log) == 0 {
		t.Fatal("the emulator logged no requests")
	}
	for _, r := range log {
		ok := false
		for _, p := range prefixes {
			ok = ok || strings.HasPrefix(r.Path, p)
		}
		if !ok {
			t.Fatalf("request %s %s is outside the provider API", r.Method, r.Path)
		}
	}
}

// since returns the log entries after the first n.
func since(all []emulator.Request, n int) []emulator.Request { return all[n:] }

func TestEmbeddedModulesLoad(t *testing.T) {
	emb := modules.Embedded()
	if len(emb) == 0 {
		// go test compiles before TestMain runs the build script; make
		// test builds the modules first and requires them here.
		testsupport.SkipUnlessRequired(t, testsupport.RequireModules,
			"this test binary was compiled before scripts/build-modules.sh built dist/ (make test builds them first)")
	}
	host, err := wasm.New(wasm.Config{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close(context.Background())
	var names []string
	for _, m := range emb {
		names = append(names, m.Name)
		a, err := host.LoadEmbedded(m.Wasm)
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		info, err := a.Describe(context.Background())
		if err != nil || info.Name != m.Name || info.Kind != "wasm" {
			t.Fatalf("%s describes itself as %+v, %v", m.Name, info, err)
		}
	}
	if got := strings.Join(names, ","); got != "cloudflare,daytona,digitalocean,e2b,runtimeapi" {
		t.Fatalf("embedded modules %s, want cloudflare,daytona,digitalocean,e2b,runtimeapi", got)
	}
	// What the binary embeds is what the build script makes from today's
	// source, not a stale copy.
	for _, m := range emb {
		if !bytes.Equal(m.Wasm, built[m.Name]) {
			t.Errorf("embedded %s differs from dist/%s.wasm as built now: the test binary predates the module's source", m.Name, m.Name)
		}
	}
}

// describe checks a module's description: the capabilities and the
// credential and config names it asks people for.
func describe(t *testing.T, e *env, want core.Capabilities, header string, config ...string) {
	t.Helper()
	info, err := e.prov.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != e.module || info.Kind != "wasm" || info.Capabilities != want {
		t.Fatalf("describe: %+v", info)
	}
	if len(info.Credentials) != 1 || info.Credentials[0].Name != "token" || info.Credentials[0].Header != header {
		t.Fatalf("credentials: %+v", info.Credentials)
	}
	var got []string
	for _, c := range info.Config {
		got = append(got, c.Name)
	}
	if strings.Join(got, ",") != strings.Join(config, ",") {
		t.Fatalf("config fields %v, want %v", got, config)
	}
}
