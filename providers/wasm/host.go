// Package wasm runs provider adapters shipped as WebAssembly modules, in a
// sandbox: a module gets no filesystem, no environment, no network except
// the companion.http_request host function, and never a credential — the
// host injects credentials into requests toward the hosts the module's
// manifest declares. ABI.md is the contract for module authors; sdk is the
// Go guest SDK.
//
// A Host owns the modules. Load one (LoadEmbedded for first-party modules
// built into the binary, LoadInstalled/Load for modules a person
// installed); each load returns an *Adapter, a core.Provider, at once and
// compiles in the background (or, with Config.CompileOnUse, only at its
// first use), so start-up is never delayed; the first call waits for the
// compile. Install, Installed and Remove manage installed
// modules, whose SHA-256 is pinned in the caller's store and checked at
// every load.
package wasm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
)

// ABIVersion is the newest module ABI this host implements (ABI.md).
const ABIVersion = 1

// Credentials gives the host an account's credential by the name the
// module's manifest declares. Errors of KindNotFound mean the account has
// no such credential. The value is injected into HTTP requests and never
// reaches the module.
type Credentials interface {
	Credential(ctx context.Context, accountID, name string) (string, error)
}

// FromSecrets reads credentials from core's secret store under
// core.CredentialKey(accountID, name).
func FromSecrets(s core.Secrets) Credentials { return secretsCredentials{s} }

type secretsCredentials struct{ s core.Secrets }

func (c secretsCredentials) Credential(ctx context.Context, accountID, name string) (string, error) {
	return c.s.Get(ctx, core.CredentialKey(accountID, name))
}

// PinStore keeps the SHA-256 (hex) and manifest of every installed module.
// db.Store implements it. ModulePin of an unknown name returns a
// *core.Error of KindNotFound.
type PinStore interface {
	PutModulePin(ctx context.Context, name, sha256 string, manifest []byte) error
	ModulePin(ctx context.Context, name string) (sha256 string, manifest []byte, err error)
	ListModulePins(ctx context.Context) ([]string, error)
	DeleteModulePin(ctx context.Context, name string) error
}

// ModuleStore is a PinStore that also keeps each installed module's bytes
// with its pin (db.PGStore), so that every host on one database loads the
// modules installed through any of them and forgets the ones removed.
type ModuleStore interface {
	PinStore
	// PutModule pins module name and stores its bytes, in one write.
	PutModule(ctx context.Context, name, sha256 string, manifest, module []byte) error
	// ModuleBytes returns the pinned hash and the bytes stored with it;
	// module is nil for a pin made before bytes were kept in the store.
	ModuleBytes(ctx context.Context, name string) (sha256 string, module []byte, err error)
	// ModuleHashes returns every pinned hash by module name.
	ModuleHashes(ctx context.Context) (map[string]string, error)
	// FillModuleBytes stores module as the bytes of a pin of hash sha256
	// that has none, reporting whether it did.
	FillModuleBytes(ctx context.Context, name, sha256 string, module []byte) (bool, error)
}

// Config configures a Host.
type Config struct {
	// CacheDir holds compiled modules so that a restart does not compile
	// again (e.g. <data-dir>/wasm-cache). Empty keeps compiled code in
	// memory only. Only this host may write there: cached code runs
	// natively.
	CacheDir string
	// ModulesDir holds installed modules as <name>.wasm (e.g.
	// <data-dir>/modules). Required by Install, Load, LoadInstalled,
	// Installed and Remove.
	ModulesDir string
	// Pins is where installed modules' hashes are pinned. Required with
	// ModulesDir. A Pins that is also a ModuleStore keeps installed
	// modules' bytes in the store instead of ModulesDir: hosts sharing a
	// database (serve replicas on PostgreSQL) install into it, load from
	// it, and follow each other's installs and removals with Sync. A file
	// in ModulesDir is then read only for a pin that has no bytes in the
	// store yet (installed before), and copied into the store.
	Pins PinStore
	// Credentials supplies credentials to inject; nil means modules can
	// only make unauthenticated requests.
	Credentials Credentials
	// Logger receives load events and modules' stdout/stderr; nil discards.
	Logger *slog.Logger
	// Progress, if not nil, is told before a module is compiled that was
	// never compiled into CacheDir (the first run on a data dir, or a new
	// module), so a person waiting knows why.
	Progress func(line string)
	// PoolSize is the most warm instances (and calls in flight) per
	// module; 0 means 2.
	PoolSize int
	// ReservedNames are names a module may not take, such as built-in
	// adapters ("docker").
	ReservedNames []string
	// DeferCompile holds every compilation until Start is called (or a
	// module is first used), so that a program can finish starting before
	// compiling takes the CPU: companion desktop prints its ready line
	// first. CacheDir is then created at the first compile rather than by
	// New (two directories on a first start, each about half a millisecond
	// on ext4); should that fail, the compile fails with the reason.
	DeferCompile bool
	// CompileOnUse compiles a module only at its first use (a call, or
	// Wait), never merely because it is loaded: a module no account uses
	// is read (its manifest) but not compiled. Until then Describe answers
	// from the manifest; the module's own describe is checked against it
	// when it compiles.
	CompileOnUse bool
	// Observe, when set, is told about every call into a module once it
	// returned: the module, the operation, how long it took and its
	// error (CallOutcome classifies it). It must be quick (metrics).
	Observe func(module, op string, d time.Duration, err error)
	// InterpretFirst runs a first-party module that was never compiled
	// into CacheDir in wazero's interpreter while the compiler works in the
	// background, and switches its calls to the compiled code when that
	// is ready: the first call on a fresh data dir waits a few hundred
	// milliseconds instead of seconds. Installed modules always wait for
	// the compiler (see RATIONALE.md).
	InterpretFirst bool
}

// Host loads and runs provider modules. It is safe for concurrent use.
type Host struct {
	cfg        Config
	shared     ModuleStore // Pins, when it keeps modules' bytes
	log        *slog.Logger
	cacheMu    sync.Mutex
	cache      wazero.CompilationCache // nil until the first compile with DeferCompile and a CacheDir
	transports *hostcall.Transports
	ctx        context.Context
	cancel     context.CancelFunc
	bg         sync.WaitGroup // background compiles (InterpretFirst)

	compileMu sync.Mutex    // one compile at a time: cheaper on small machines, and makes cache hits observable
	gate      chan struct{} // closed by Start: compiles may begin
	startOnce sync.Once
	installMu sync.Mutex

	mu       sync.Mutex
	adapters map[string]*Adapter
	embedded map[string]*Adapter
	closed   bool

	// syncFailed is, per module name, the pinned hash whose load failed
	// at a Sync, which reports it once. Guarded by installMu.
	syncFailed map[string]syncFailure
}

// New returns a Host. It creates CacheDir (mode 0700) if needed, unless
// cfg.DeferCompile leaves that to the first compile.
func New(cfg Config) (*Host, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Host{
		cfg:        cfg,
		log:        log,
		transports: hostcall.NewTransports(),
		adapters:   map[string]*Adapter{},
		embedded:   map[string]*Adapter{},
		gate:       make(chan struct{}),
		syncFailed: map[string]syncFailure{},
	}
	h.shared, _ = cfg.Pins.(ModuleStore)
	if !cfg.DeferCompile {
		h.Start()
	}
	if cfg.CacheDir == "" {
		h.cache = wazero.NewCompilationCache()
	} else if !cfg.DeferCompile {
		if _, err := h.compilationCache(); err != nil {
			return nil, err
		}
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h, nil
}

// compilationCache returns the compile cache, creating CacheDir and the
// cache in it at the first call.
func (h *Host) compilationCache() (wazero.CompilationCache, error) {
	h.cacheMu.Lock()
	defer h.cacheMu.Unlock()
	if h.cache != nil {
		return h.cache, nil
	}
	if err := os.MkdirAll(h.cfg.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("wasm: cache dir: %w", err)
	}
	c, err := wazero.NewCompilationCacheWithDir(h.cfg.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("wasm: cache dir: %w", err)
	}
	h.cache = c
	return c, nil
}

// Start lets compilation begin (see Config.DeferCompile). It is safe to
// call more than once.
func (h *Host) Start() {
	h.startOnce.Do(func() { close(h.gate) })
}

// LoadEmbedded loads a first-party module built into the binary. It is
// trusted by construction (no pin) but gets the same manifest validation
// and sandbox as any module. It returns once the manifest is validated;
// compilation continues in the background.
func (h *Host) LoadEmbedded(bin []byte) (*Adapter, error) {
	m, mjson, err := parseModule(bin)
	if err != nil {
		return nil, err
	}
	a, err := h.start(newAdapter(h, m, mjson, bin, true))
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.embedded[m.Name] = a
	h.mu.Unlock()
	return a, nil
}

// LoadEmbeddedLazy is LoadEmbedded for a module that is read from open's
// file piecemeal: its manifest once compilation may begin (see
// Config.DeferCompile and Start), its code only to compile, its SHA-256
// when asked. Copying and hashing megabytes of embedded modules at every
// start would compete with companion's first answers. The file must read
// at any offset (io.ReaderAt), as embed.FS files do. name must be the name
// in the module's manifest; a module that turns out to be invalid fails
// every call with the reason.
func (h *Host) LoadEmbeddedLazy(name string, open func() (fs.File, error)) (*Adapter, error) {
	if err := manifest.CheckName(name); err != nil {
		return nil, core.Errorf(core.KindInvalid, "first-party module name: %v", err)
	}
	a := &Adapter{h: h, name: name, builtin: true, open: open, parsed: make(chan struct{}), ready: make(chan struct{}),
		wanted: make(chan struct{}), unloaded: make(chan struct{})}
	a, err := h.start(a)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.embedded[name] = a
	h.mu.Unlock()
	return a, nil
}

// Load loads the installed module called name after checking its bytes
// against the pinned SHA-256. A module whose file changed is refused and
// never run. Compilation continues in the background.
func (h *Host) Load(ctx context.Context, name string) (*Adapter, error) {
	if err := h.needInstallDirs(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	_, builtin := h.embedded[name]
	h.mu.Unlock()
	if builtin {
		return nil, core.Errorf(core.KindConflict, "provider module %s is built in; the installed copy is ignored (remove it with companion providers remove)", name)
	}
	bin, err := h.installedBytes(ctx, name)
	if err != nil {
		return nil, err
	}
	m, mjson, err := parseModule(bin)
	if err != nil {
		return nil, err
	}
	if m.Name != name {
		return nil, core.Errorf(core.KindConflict, "provider module file %s holds module %q, not %q", h.modulePath(name), m.Name, name)
	}
	return h.start(newAdapter(h, m, mjson, bin, false))
}

// installedBytes returns the bytes of installed module name, checked
// against its pinned SHA-256: from the shared store when the host has one
// and the pin carries bytes, else from the module's file (which, with a
// shared store, is then copied into it for the other hosts).
func (h *Host) installedBytes(ctx context.Context, name string) ([]byte, error) {
	notInstalled := func(err error) error {
		if core.IsKind(err, core.KindNotFound) {
			return core.Errorf(core.KindNotFound, "provider module %q is not installed", name)
		}
		return err
	}
	var sum string
	if h.shared != nil {
		s, bin, err := h.shared.ModuleBytes(ctx, name)
		if err != nil {
			return nil, notInstalled(err)
		}
		if bin != nil {
			if got := sha256Hex(bin); got != s {
				return nil, core.Errorf(core.KindConflict,
					"provider module %s was not loaded: its bytes in the database do not match its pin (sha256 %s, pinned %s); reinstall it",
					name, got, s)
			}
			return bin, nil
		}
		sum = s
	} else {
		s, _, err := h.cfg.Pins.ModulePin(ctx, name)
		if err != nil {
			return nil, notInstalled(err)
		}
		sum = s
	}
	bin, err := os.ReadFile(h.modulePath(name))
	if err != nil {
		return nil, &core.Error{Kind: core.KindUnavailable, Message: fmt.Sprintf("provider module %s is installed but its file cannot be read; reinstall it", name), Err: err}
	}
	if got := sha256Hex(bin); got != sum {
		return nil, core.Errorf(core.KindConflict,
			"provider module %s was not loaded: its file %s changed since it was installed (sha256 %s, pinned %s); reinstall it if the change is intended",
			name, h.modulePath(name), got, sum)
	}
	if h.shared != nil {
		if ok, err := h.shared.FillModuleBytes(ctx, name, sum, bin); err != nil {
			h.log.Warn("provider module not copied into the database", "module", name, "err", err)
		} else if ok {
			h.log.Info("provider module copied into the database from its file", "module", name, "sha256", sum)
		}
	}
	return bin, nil
}

// LoadInstalled loads every installed module. Modules that fail to load
// (changed on disk, missing, invalid) are left out and reported in the
// joined error; the others are returned.
func (h *Host) LoadInstalled(ctx context.Context) ([]*Adapter, error) {
	if err := h.needInstallDirs(); err != nil {
		return nil, err
	}
	names, err := h.cfg.Pins.ListModulePins(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Adapter
	var errs []error
	for _, n := range names {
		a, err := h.Load(ctx, n)
		if err != nil {
			h.log.Error("provider module not loaded", "module", n, "err", err)
			errs = append(errs, err)
			continue
		}
		out = append(out, a)
	}
	return out, errors.Join(errs...)
}

// Adapter returns the loaded adapter called name.
func (h *Host) Adapter(name string) (*Adapter, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.adapters[name]
	return a, ok
}

// Close stops background compiles, waits for calls in flight (each is
// bounded by its module's call timeout) and closes every module.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	all := make([]*Adapter, 0, len(h.adapters))
	for _, a := range h.adapters {
		all = append(all, a)
	}
	h.adapters = map[string]*Adapter{}
	h.mu.Unlock()
	h.cancel()
	var errs []error
	for _, a := range all {
		errs = append(errs, a.close(ctx))
	}
	// A compile in the background cannot be interrupted; it uses the
	// cache, which closes below.
	bgDone := make(chan struct{})
	go func() { h.bg.Wait(); close(bgDone) }()
	select {
	case <-bgDone:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	h.transports.Close()
	h.cacheMu.Lock()
	if h.cache != nil {
		errs = append(errs, h.cache.Close(ctx))
	}
	h.cacheMu.Unlock()
	return errors.Join(errs...)
}

func (h *Host) start(a *Adapter) (*Adapter, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, core.Errorf(core.KindUnavailable, "the wasm host is closed")
	}
	old := h.adapters[a.name]
	h.adapters[a.name] = a
	h.mu.Unlock()
	if old != nil {
		go func() { _ = old.close(context.Background()) }()
	}
	go a.load(h.ctx)
	return a, nil
}

// background runs f on its own goroutine, which Close waits for; once the
// host is closing it runs nothing.
func (h *Host) background(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		f()
	}()
}

func (h *Host) forget(a *Adapter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.adapters[a.name] == a {
		delete(h.adapters, a.name)
	}
}

func (h *Host) needInstallDirs() error {
	if h.cfg.ModulesDir == "" || h.cfg.Pins == nil {
		return core.Errorf(core.KindUnavailable, "installing provider modules is not configured (no modules directory or pin store)")
	}
	return nil
}

func (h *Host) modulePath(name string) string {
	return filepath.Join(h.cfg.ModulesDir, name+".wasm")
}

// cacheEntries counts files under the cache dir; a compile that adds one
// missed the cache.
func (h *Host) cacheEntries() int {
	if h.cfg.CacheDir == "" {
		return -1
	}
	n := 0
	_ = filepath.WalkDir(h.cfg.CacheDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && path == filepath.Join(h.cfg.CacheDir, seenDir) {
			return filepath.SkipDir
		}
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}
