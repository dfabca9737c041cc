package wasm

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
)

const goodToken = "tok-GOOD-0123456789abcdef"

func goodAccount(api *boxAPI) core.Account {
	return core.Account{ID: "acc-good", Provider: "good", Config: map[string]string{"api_url": api.URL()}}
}

func TestGoodModuleLifecycle(t *testing.T) {
	e := newEnv(t)
	e.setCred(t, "acc-good", "token", goodToken)
	api := newBoxAPI(t, goodToken)
	a := e.load(t, goodWasm)
	ctx := context.Background()
	acct := goodAccount(api)

	info, err := a.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "good" || info.Version != "1.0.0" || info.Kind != "wasm" || !info.Capabilities.Suspend {
		t.Fatalf("describe: %+v", info)
	}
	if len(info.Credentials) != 2 || info.Credentials[0].Header != "Authorization: Bearer {token}" || info.Credentials[1].Header != "X-Files-Key: {token}" {
		t.Fatalf("credentials: %+v", info.Credentials)
	}
	if len(info.Config) != 3 || info.Config[0].Name != "api_url" {
		t.Fatalf("config: %+v", info.Config)
	}

	var ids []string
	for i := 0; i < 3; i++ {
		b, err := a.Create(ctx, acct, core.CreateSpec{WorkspaceID: "ws-" + string(rune('a'+i)), Name: "box", Lifecycle: core.Lifecycle{IdlePauseAfter: 90 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		if b.State != core.StateRunning || b.Labels[core.LabelWorkspace] != "ws-"+string(rune('a'+i)) {
			t.Fatalf("create: %+v", b)
		}
		if b.Size == nil || b.Size.Bytes != 10<<30 || b.Size.Source != core.SizeProviderAPIAllocated {
			t.Fatalf("size: %+v", b.Size)
		}
		ids = append(ids, b.ID)
	}
	if got := api.boxes[ids[0]].Idle; got != 90 {
		t.Fatalf("idle setting reached the API as %d", got)
	}
	boxes, err := a.List(ctx, acct) // 3 boxes over 2 pages
	if err != nil {
		t.Fatal(err)
	}
	if len(boxes) != 3 {
		t.Fatalf("list: %d boxes", len(boxes))
	}
	b, err := a.Suspend(ctx, acct, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if b.State != core.StatePaused || b.PausedAt.IsZero() {
		t.Fatalf("suspend: %+v", b)
	}
	b, err = a.Resume(ctx, acct, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if b.State != core.StateRunning || b.LastActivityAt.IsZero() {
		t.Fatalf("resume: %+v", b)
	}
	if err := a.Delete(ctx, acct, ids[2]); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, acct, ids[2]); err != nil {
		t.Fatalf("deleting a gone box must succeed: %v", err)
	}
	_, err = a.Get(ctx, acct, ids[2])
	mustKind(t, err, core.KindNotFound, "no such box")

	// Error mapping from the API through the SDK to core kinds.
	api.mu.Lock()
	api.rateLimit = true
	api.mu.Unlock()
	_, err = a.List(ctx, acct)
	ce := mustKind(t, err, core.KindRateLimited, "slow down")
	if ce.RetryAfter != 7*time.Second {
		t.Fatalf("retry after %v", ce.RetryAfter)
	}
	api.mu.Lock()
	api.rateLimit, api.fail = false, true
	api.mu.Unlock()
	_, err = a.List(ctx, acct)
	mustKind(t, err, core.KindUnavailable, "maintenance")
	api.mu.Lock()
	api.fail = false
	api.mu.Unlock()

	e.setCred(t, "acc-good", "token", "wrong-token-value")
	_, err = a.List(ctx, acct)
	mustKind(t, err, core.KindUnauthorized)
	e.delCred(t, "acc-good", "token")
	_, err = a.List(ctx, acct)
	mustKind(t, err, core.KindUnauthorized, "has no credential")

	// Bad account settings are the person's to fix, not a module fault.
	bad := acct
	bad.Config = map[string]string{"api_url": "ftp://x"}
	_, err = a.List(ctx, bad)
	mustKind(t, err, core.KindInvalid, "api_url")

	// No instance was discarded by ordinary errors.
	if st := a.Stats(); st.Discarded != 0 || st.Created != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Set-Cookie never reaches the module, and the module's requests
	// carried the credential only in the declared header.
	for _, r := range api.seen() {
		if r.Header.Get("X-Files-Key") != "" {
			t.Fatalf("files credential sent to the api upstream: %v", r)
		}
	}
}

func TestCredentialsOnlyTowardBoundUpstreams(t *testing.T) {
	e := newEnv(t)
	const filesKey = "files-KEY-abcdef0123456789"
	e.setCred(t, "acc-good", "token", goodToken)
	e.setCred(t, "acc-good", "files_key", filesKey)
	api := newBoxAPI(t, goodToken)
	var mu sync.Mutex
	var filesSeen []http.Header
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		filesSeen = append(filesSeen, r.Header.Clone())
		mu.Unlock()
		if r.Header.Get("X-Files-Key") != filesKey {
			writeJSON(w, 401, map[string]string{"message": "no key"})
			return
		}
		writeJSON(w, 200, apiBox{ID: "file-1", State: "stopped"})
	}))
	t.Cleanup(files.Close)
	api.redirect = files.URL + "/files/file-1"
	a := e.load(t, goodWasm)
	acct := goodAccount(api)
	acct.Config["files_url"] = files.URL

	b, err := a.Get(context.Background(), acct, "file-1")
	if err != nil {
		t.Fatal(err)
	}
	if b.ID != "file-1" || b.State != core.StatePaused {
		t.Fatalf("%+v", b)
	}
	// A redirect from the api upstream to the files upstream (another
	// declared host) is followed; the api token is not carried along.
	if _, err := a.Get(context.Background(), acct, "redirected"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(filesSeen) != 2 {
		t.Fatalf("files upstream saw %d requests", len(filesSeen))
	}
	for _, h := range filesSeen {
		if h.Get("Authorization") != "" {
			t.Fatalf("api token sent to the files upstream: %v", h)
		}
		if h.Get("X-Files-Key") != filesKey {
			t.Fatalf("files key missing: %v", h)
		}
	}
	for _, r := range api.seen() {
		if r.Header.Get("Authorization") != "Bearer "+goodToken {
			t.Fatalf("api request without the injected token: %+v", r)
		}
		if r.Header.Get("X-Files-Key") != "" {
			t.Fatalf("files key sent to the api upstream")
		}
	}
}

func TestPoolReuseAndDiscard(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PoolSize = 2 })
	a := e.load(t, goodWasm)
	acct := core.Account{ID: "acc", Config: map[string]string{"mode": "static"}}
	for i := 0; i < 20; i++ {
		if _, err := a.List(context.Background(), acct); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.Stats(); st.Created != 1 || st.Idle != 1 || st.Calls != 20 {
		t.Fatalf("sequential calls must reuse one instance: %+v", st)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				if _, err := a.List(context.Background(), acct); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if st := a.Stats(); st.Created > 2 || st.Live > 2 {
		t.Fatalf("pool exceeded its bound: %+v", st)
	}

	// A module that breaks a rule loses its instance; the next call gets
	// a fresh one.
	hm := e.load(t, hostile)
	before := hm.Stats()
	_, err := hm.List(context.Background(), core.Account{ID: "acc-h", Config: map[string]string{"behavior": "undeclared"}})
	mustKind(t, err, core.KindInternal, "sandbox rule", "evil")
	mid := hm.Stats()
	if mid.Discarded != before.Discarded+1 || mid.Idle != 0 {
		t.Fatalf("violating instance kept: before %+v after %+v", before, mid)
	}
	if _, err := hm.List(context.Background(), core.Account{ID: "acc-h", Config: map[string]string{"behavior": "fine"}}); err != nil {
		t.Fatal(err)
	}
	if st := hm.Stats(); st.Created != mid.Created+1 {
		t.Fatalf("no fresh instance: %+v", st)
	}
	// An ordinary error from the module keeps the instance.
	_, err = hm.List(context.Background(), core.Account{ID: "acc-h", Config: map[string]string{"behavior": "nonsense"}})
	mustKind(t, err, core.KindInvalid, "unknown behavior")
	if st := hm.Stats(); st.Discarded != mid.Discarded || st.Idle != 1 {
		t.Fatalf("instance discarded after an ordinary error: %+v", st)
	}
}

func TestCompileCacheHitOnSecondHost(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wasm-cache")
	first := newEnv(t, func(c *Config) { c.CacheDir = dir })
	a := first.load(t, goodWasm)
	info, _ := a.Wait(context.Background())
	if info.CompileCache != "miss" {
		t.Fatalf("first load: compile_cache %q", info.CompileCache)
	}
	if !strings.Contains(first.logs.String(), "compile_cache=miss") {
		t.Fatalf("load not logged: %s", first.logs.String())
	}
	if err := first.host.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := newEnv(t, func(c *Config) { c.CacheDir = dir })
	a = second.load(t, goodWasm)
	info, _ = a.Wait(context.Background())
	if info.CompileCache != "hit" {
		t.Fatalf("second load: compile_cache %q", info.CompileCache)
	}
	if _, err := a.List(context.Background(), core.Account{ID: "a", Config: map[string]string{"mode": "static"}}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir mode: %v %v", st.Mode(), err)
	}
}

func TestLoadReturnsBeforeCompile(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.CacheDir = filepath.Join(t.TempDir(), "cold") })
	a, err := e.host.LoadEmbedded(goodWasm)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.ready:
		t.Fatal("LoadEmbedded waited for the compile")
	default:
	}
	// A caller that cannot wait gets a clear error, not a hang.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = a.Describe(ctx)
	mustKind(t, err, core.KindUnavailable, "still loading")
	// The first real call waits for the compile.
	info, err := a.Describe(context.Background())
	if err != nil || info.Name != "good" {
		t.Fatalf("%+v %v", info, err)
	}
}

func TestCloseOnContextDone(t *testing.T) {
	e := newEnv(t)
	hm := e.load(t, hostile)
	good := e.load(t, goodWasm)
	loop := core.Account{ID: "h", Config: map[string]string{"behavior": "loop"}}

	// The caller gives up: the spinning guest is stopped at once, not at
	// its own deadline.
	ctx, cancel := context.WithCancel(context.Background())
	before := hm.Stats().Calls
	go func() {
		// Cancel once the call has reached an instance (the guest spins).
		_ = testsupport.PollErr(30*time.Second, func() error {
			if hm.Stats().Calls > before {
				return nil
			}
			return errors.New("the call has not reached an instance")
		})
		cancel()
	}()
	_, err := hm.List(ctx, loop)
	ce := mustKind(t, err, core.KindUnavailable, "cancelled")
	if !errors.Is(ce, context.Canceled) {
		t.Fatalf("cause is not context.Canceled: %v", ce.Err)
	}
	// The module's own deadline (1.5 s in its manifest) stops it too.
	_, err = hm.List(context.Background(), loop)
	mustKind(t, err, core.KindUnavailable, "did not finish list within 1.5s")
	if st := hm.Stats(); st.Discarded != 2 || st.Idle != 0 {
		t.Fatalf("stopped instances kept: %+v", st)
	}
	// Everything keeps serving.
	if _, err := good.List(context.Background(), core.Account{ID: "g", Config: map[string]string{"mode": "static"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := hm.List(context.Background(), core.Account{ID: "h", Config: map[string]string{"behavior": "fine"}}); err != nil {
		t.Fatal(err)
	}
}

func TestAccountOfAnotherProviderRefused(t *testing.T) {
	e := newEnv(t)
	a := e.load(t, goodWasm)
	_, err := a.List(context.Background(), core.Account{ID: "x", Provider: "docker"})
	mustKind(t, err, core.KindInvalid, "belongs to provider docker")
}

func TestModuleOutputGoesToLogs(t *testing.T) {
	e := newEnv(t)
	hm := e.load(t, hostile)
	_, err := hm.List(context.Background(), core.Account{ID: "h", Config: map[string]string{"behavior": "panic"}})
	mustKind(t, err, core.KindInternal, "panicked")
	// The SDK recovered the panic; the instance stays.
	if st := hm.Stats(); st.Discarded != 0 {
		t.Fatalf("%+v", st)
	}
	if _, err := hm.List(context.Background(), core.Account{ID: "h", Config: map[string]string{"behavior": "chatty"}}); err != nil {
		t.Fatal(err)
	}
	logs := e.logs.String()
	for _, want := range []string{`module=hostile`, `stream=stdout line="hello from the guest"`, `stream=stderr line="noise line 0"`, "module output truncated"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("logs lack %q:\n%s", want, logs)
		}
	}
	// Bounded: 20000 lines were written, a few dozen reach the log.
	if n := strings.Count(logs, "noise line"); n > 50 {
		t.Fatalf("%d stderr lines logged", n)
	}
}

func TestDescribeChecksManifest(t *testing.T) {
	e := newEnv(t)
	// The same code packed under another version: describe disagrees.
	a := e.load(t, repack(t, goodWasm, func(m map[string]any) { m["version"] = "9.9.9" }))
	_, err := a.Describe(context.Background())
	ce := mustKind(t, err, core.KindInternal, "contradicts its manifest", `describe says version "1.0.0"`, `"9.9.9"`)
	var me *ModuleError
	if !errors.As(ce, &me) || me.Module != "good" || me.Op != "describe" || me.Field != "version" {
		t.Fatalf("not a named module error: %#v", ce.Err)
	}
}

func TestDeferredLazyLoadReadsNothingBeforeStart(t *testing.T) {
	// In a synctest bubble, Wait returns only once every goroutine of the
	// bubble is durably blocked: had the loader been going to read the
	// module before Start, it would have done so by then.
	synctest.Test(t, func(t *testing.T) {
		h, err := New(Config{DeferCompile: true})
		if err != nil {
			t.Fatal(err)
		}
		// Closing ends the loader goroutine, which the bubble needs before
		// it returns, also when the test fails.
		defer h.Close(context.Background())
		var reads atomic.Int32
		a, err := h.LoadEmbeddedLazy("good", func() (fs.File, error) {
			reads.Add(1)
			return moduleFile(goodWasm)()
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := reads.Load(); n != 0 {
			t.Fatalf("module read %d times before Start", n)
		}
		select {
		case <-a.ready:
			t.Fatal("module loaded before Start")
		default:
		}
	})

	e := newEnv(t, func(c *Config) { c.DeferCompile = true })
	var reads sync.WaitGroup
	reads.Add(1)
	var once sync.Once
	a, err := e.host.LoadEmbeddedLazy("good", func() (fs.File, error) {
		once.Do(reads.Done)
		return moduleFile(goodWasm)()
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != "good" || !a.Builtin() {
		t.Fatalf("lazy adapter: name %q builtin %v", a.Name(), a.Builtin())
	}
	// A caller that waits lets compilation begin.
	info, err := a.Describe(context.Background())
	if err != nil || info.Name != "good" {
		t.Fatalf("describe after lazy load: %+v %v", info, err)
	}
	reads.Wait()
	if s := a.Summary(); s.SHA256 == "" || s.Name != "good" || !s.Builtin {
		t.Fatalf("summary: %+v", s)
	}
	// The name is reserved like any first-party module's.
	if _, err := e.host.Install(context.Background(), goodWasm); !core.IsKind(err, core.KindConflict) {
		t.Fatalf("install over a lazy first-party module: %v", err)
	}
}

// moduleFile opens b as an embedded module's file, as embed.FS would.
func moduleFile(b []byte) func() (fs.File, error) {
	return func() (fs.File, error) { return fstest.MapFS{"m.wasm": {Data: b}}.Open("m.wasm") }
}

func TestLazyLoadOfAMisnamedModuleFailsCalls(t *testing.T) {
	e := newEnv(t)
	a, err := e.host.LoadEmbeddedLazy("other", moduleFile(goodWasm))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Describe(context.Background())
	mustKind(t, err, core.KindInternal, `calls itself "good"`)
	if s := a.Summary(); s.Name != "other" {
		t.Fatalf("summary of a failed module: %+v", s)
	}
	if _, err := e.host.LoadEmbeddedLazy("Not A Name", moduleFile(nil)); !core.IsKind(err, core.KindInvalid) {
		t.Fatalf("bad name: %v", err)
	}
}

// With DeferCompile, New leaves the cache dir alone (companion's first
// start does not pay for making it before its ready line); the first
// compile makes it, mode 0700, and caches into it.
func TestDeferredCacheDirMadeAtFirstCompile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wasm-cache")
	e := newEnv(t, func(c *Config) { c.CacheDir = dir; c.DeferCompile = true })
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("New made the cache dir before any compile: %v", err)
	}
	e.host.Start()
	a := e.load(t, goodWasm)
	info, err := a.Wait(context.Background())
	if err != nil || info.CompileCache != "miss" {
		t.Fatalf("first compile: %+v %v", info, err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir after the first compile: %v %v", st, err)
	}
}

// A cache dir that cannot be made fails the compile, naming it.
func TestDeferredCacheDirThatCannotBeMade(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.CacheDir = filepath.Join(file, "wasm-cache"); c.DeferCompile = true })
	e.host.Start()
	a, err := e.host.LoadEmbedded(goodWasm)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := a.Wait(ctx); err == nil || !strings.Contains(err.Error(), "wasm: cache dir") {
		t.Fatalf("compile with an unusable cache dir: %v", err)
	}
}
