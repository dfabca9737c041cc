package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/template"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/secrets"
)

// Test modules are built from source once per test run (a Go wasm build
// takes seconds) into a temporary directory.
var (
	artifacts  string
	sharedDir  string // compile cache shared by tests that do not test the cache
	goodWasm   []byte // testdata/good, packed
	reachWasm  []byte // testdata/endpoint, packed
	hostile    []byte // testdata/hostile, packed
	procBinary string // testdata/proc, native
	watRaw     = map[string][]byte{}

	// privateListener is a real server on 127.0.0.1 that the hostile
	// module's "internal" upstream (https://localhost:PORT) points at; it
	// must never see a connection.
	privateConns atomic.Int64
	privatePort  int
)

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		code = 1
	}
	if artifacts != "" {
		os.RemoveAll(artifacts)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	var err error
	artifacts, err = os.MkdirTemp("", "companion-wasm-test-")
	if err != nil {
		return 1, err
	}
	sharedDir = filepath.Join(artifacts, "cache")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1, err
	}
	privatePort = ln.Addr().(*net.TCPAddr).Port
	priv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "reached") }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				privateConns.Add(1)
			}
		},
	}
	go priv.Serve(ln)
	defer priv.Close()

	if goodWasm, err = buildGuest("testdata/good", nil); err != nil {
		return 1, err
	}
	if reachWasm, err = buildGuest("testdata/endpoint", nil); err != nil {
		return 1, err
	}
	if hostile, err = buildGuest("testdata/hostile", map[string]string{"{{PRIVATE_PORT}}": strconv.Itoa(privatePort)}); err != nil {
		return 1, err
	}
	procBinary = filepath.Join(artifacts, "proc")
	if out, err := exec.Command("go", "build", "-o", procBinary, "./testdata/proc").CombinedOutput(); err != nil {
		return 1, fmt.Errorf("build proc: %v\n%s", err, out)
	}
	files, _ := filepath.Glob("testdata/wat/*.wat")
	files = append(files, "examples/minimal-wat/minimal.wat")
	for _, f := range files {
		b, err := wat2wasm(f)
		if err != nil {
			return 1, err
		}
		watRaw[strings.TrimSuffix(filepath.Base(f), ".wat")] = b
	}
	return m.Run(), nil
}

func buildGuest(dir string, replace map[string]string) ([]byte, error) {
	out := filepath.Join(artifacts, filepath.Base(dir)+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./"+dir)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build %s: %v\n%s", dir, err, b)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	mjson, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	for k, v := range replace {
		mjson = bytes.ReplaceAll(mjson, []byte(k), []byte(v))
	}
	return Pack(bin, mjson)
}

// wat2wasm assembles a WAT file. A file that uses {{repeat N "text"}}
// (a module too large to keep as text: millions of locals, megabytes of
// code) is expanded first.
func wat2wasm(path string) ([]byte, error) {
	out := filepath.Join(artifacts, filepath.Base(path)+".wasm")
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if bytes.Contains(src, []byte("{{")) {
		tmpl, err := template.New(path).Funcs(template.FuncMap{"repeat": func(n int, s string) string { return strings.Repeat(s, n) }}).Parse(string(src))
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := tmpl.Execute(&b, nil); err != nil {
			return nil, err
		}
		path = filepath.Join(artifacts, "expanded-"+filepath.Base(path))
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	if b, err := exec.Command("wat2wasm", path, "-o", out).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("wat2wasm %s (install wabt): %v\n%s", path, err, b)
	}
	return os.ReadFile(out)
}

// watModule packs an assembled WAT module with a manifest for it.
func watModule(t testing.TB, name string, edit func(m map[string]any)) []byte {
	t.Helper()
	raw, ok := watRaw[name]
	if !ok {
		t.Fatalf("no WAT module %s", name)
	}
	m := map[string]any{
		"name":         strings.ReplaceAll(name, "_", "-"),
		"version":      "0.0.1",
		"abi_version":  1,
		"description":  "test module " + name,
		"upstreams":    map[string]any{"api": map[string]any{"base_url": "https://api.test.example", "override": "api_url"}},
		"credentials":  []any{map[string]any{"name": "token", "description": "token", "header": "Authorization", "format": "Bearer {token}", "upstreams": []string{"api"}}},
		"config":       []any{map[string]any{"name": "api_url", "description": "override"}},
		"limits":       map[string]any{"memory_mib": 2, "call_timeout_ms": 1000},
		"capabilities": map[string]any{"list": true},
	}
	if edit != nil {
		edit(m)
	}
	bin, err := Pack(raw, mustJSON(t, m))
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// logBuf collects a host's log output for assertions.
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

type env struct {
	host *Host
	logs *logBuf
	keys *secrets.Keyring
	dir  string
	pins *db.Store // the real store, on a temporary file
}

type hostOpt func(*Config)

func newEnv(t testing.TB, opts ...hostOpt) *env {
	t.Helper()
	e := &env{logs: &logBuf{}, dir: t.TempDir(), keys: &secrets.Keyring{Namespace: core.NewID("test")}}
	store, err := db.Open(context.Background(), filepath.Join(e.dir, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	e.pins = store
	cfg := Config{
		CacheDir:      sharedDir,
		ModulesDir:    filepath.Join(e.dir, "modules"),
		Pins:          e.pins,
		Credentials:   FromSecrets(e.keys),
		Logger:        slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ReservedNames: []string{"docker"},
	}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.host = h
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close host: %v", err)
		}
	})
	return e
}

func (e *env) load(t testing.TB, bin []byte) *Adapter {
	t.Helper()
	a, err := e.host.LoadEmbedded(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := a.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	return a
}

func mustKind(t testing.TB, err error, kind core.ErrorKind, contains ...string) *core.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %s error, got nil", kind)
	}
	var ce *core.Error
	if !errors.As(err, &ce) {
		t.Fatalf("want *core.Error, got %T: %v", err, err)
	}
	if ce.Kind != kind {
		t.Fatalf("want kind %s, got %s: %v", kind, ce.Kind, err)
	}
	t.Logf("%s: %s", ce.Kind, ce.Message)
	for _, c := range contains {
		if !strings.Contains(ce.Message, c) {
			t.Fatalf("error %q does not mention %q", ce.Message, c)
		}
	}
	return ce
}

// needKeyring skips the test when there is no OS keyring (Secret Service)
// to keep credentials in, or fails it when COMPANION_REQUIRE_KEYRING=1
// (make test and CI start a private one: scripts/with-keyring.sh).
func needKeyring(t testing.TB, k *secrets.Keyring) {
	t.Helper()
	testsupport.NeedKeyring(t, k)
}

// setCred stores a credential of an account in the real keyring, where the
// host reads it from, and removes it when the test ends.
func (e *env) setCred(t testing.TB, accountID, name, value string) {
	t.Helper()
	needKeyring(t, e.keys)
	key := core.CredentialKey(accountID, name)
	if err := e.keys.Set(context.Background(), key, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.delCred(t, accountID, name) })
}

// delCred removes a credential; removing one that is gone is fine.
func (e *env) delCred(t testing.TB, accountID, name string) {
	t.Helper()
	err := e.keys.Delete(context.Background(), core.CredentialKey(accountID, name))
	if err != nil && !core.IsKind(err, core.KindNotFound) {
		t.Errorf("delete credential %s of %s: %v", name, accountID, err)
	}
}
