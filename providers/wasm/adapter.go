package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/providers/wasm/internal/sandbox"
	"github.com/canvasapp/companion/providers/wasm/internal/wire"
)

// Adapter is one loaded module as a core.Provider. Every method waits for
// the module to finish compiling (honouring ctx), runs on a pooled
// instance under the module's call timeout, and returns *core.Error values.
type Adapter struct {
	h       *Host
	name    string
	builtin bool

	// parsed is closed once man, mjson, bin and policy are set: at
	// construction, or for a lazily loaded first-party module when it has
	// been read (after Host.Start). They do not change afterwards.
	parsed chan struct{}
	man    *manifest.Manifest
	mjson  []byte
	bin    []byte // nil for a module read from open
	policy *hostcall.Policy

	// open reads a lazily loaded first-party module (LoadEmbeddedLazy);
	// nil for the others, whose bytes are in bin.
	open func() (fs.File, error)

	// The SHA-256 of a module is worked out when first asked for: hashing
	// the first-party modules (megabytes each) at every start would
	// compete with companion's first answers.
	shaOnce sync.Once
	sha     string

	// wanted is closed at the first use (Config.CompileOnUse), unloaded
	// when the adapter is closed; a load waiting for a use stops at either.
	wantOnce   sync.Once
	wanted     chan struct{}
	unloadOnce sync.Once
	unloaded   chan struct{}

	ready chan struct{}
	// mod is set before ready closes. A module that runs interpreted while
	// it compiles (Config.InterpretFirst) is replaced once, by its compiled
	// twin.
	mod     atomic.Pointer[sandbox.Module]
	loadErr error
	info    LoadInfo

	descMu sync.Mutex
	desc   *core.ProviderInfo

	// life is held shared by every call and exclusively by close, so close
	// waits for calls in flight and later calls see closing.
	life    sync.RWMutex
	closing bool
}

var (
	_ core.Provider = (*Adapter)(nil)
	_ core.Preparer = (*Adapter)(nil)
)

// LoadInfo describes how a module was loaded.
type LoadInfo struct {
	Name    string
	Version string
	SHA256  string
	// CompileCache is "hit" when the compiled code came from the disk
	// cache, "miss" when it was compiled (and cached), "off" without a
	// cache dir or when the module runs interpreted (InterpretFirst).
	CompileCache string
	CompileTime  time.Duration
}

// Stats count a module's instances.
type Stats struct {
	Live      int   // instances alive now (idle and busy)
	Idle      int   // instances waiting for a call
	Created   int64 // instances created since load
	Discarded int64 // instances thrown away after a trap, timeout or broken rule
	Calls     int64 // calls that reached an instance
}

func newAdapter(h *Host, m *manifest.Manifest, mjson, bin []byte, builtin bool) *Adapter {
	a := &Adapter{h: h, name: m.Name, builtin: builtin, parsed: make(chan struct{}), ready: make(chan struct{}),
		wanted: make(chan struct{}), unloaded: make(chan struct{})}
	a.setModule(m, mjson, bin)
	return a
}

// setModule records the module's bytes and manifest and closes parsed.
func (a *Adapter) setModule(m *manifest.Manifest, mjson, bin []byte) {
	a.man, a.mjson, a.bin = m, mjson, bin
	a.policy = hostcall.NewPolicy(m, a.h.cfg.Credentials, a.h.transports)
	close(a.parsed)
}

// load compiles the module (one compile at a time per host), checks it
// against the ABI and its manifest, and warms one instance. A lazily
// loaded first-party module's manifest is read here first, and its code
// only once it is to be compiled.
func (a *Adapter) load(ctx context.Context) {
	defer close(a.ready)
	select {
	case <-a.h.gate:
	case <-ctx.Done():
		if a.open != nil {
			close(a.parsed) // never read
		}
		a.fail(ctx, ctx.Err())
		return
	}
	if a.open != nil {
		if err := a.readManifest(); err != nil {
			a.fail(ctx, err)
			return
		}
	}
	if a.h.cfg.CompileOnUse {
		select {
		case <-a.wanted:
		case <-a.unloaded:
			a.fail(ctx, errUnloaded)
			return
		case <-ctx.Done():
			a.fail(ctx, ctx.Err())
			return
		}
	}
	bin := a.bin
	if a.open != nil {
		var err error
		if bin, err = a.readCode(); err != nil {
			a.fail(ctx, err)
			return
		}
	}
	a.info = LoadInfo{Name: a.name, Version: a.man.Version, SHA256: a.sha256(), CompileCache: "off"}
	interpret := a.h.cfg.InterpretFirst && a.builtin && !a.h.compiledBefore(bin)
	mod, err := a.h.compile(ctx, a.name, a.man, bin, &a.info, interpret)
	if err == nil {
		err = a.check(ctx, mod)
	}
	if err != nil {
		a.fail(ctx, err)
		return
	}
	a.mod.Store(mod)
	a.h.log.Info("provider module ready", "module", a.name, "version", a.man.Version, "sha256", a.sha256(),
		"compile_cache", a.info.CompileCache, "compile_ms", a.info.CompileTime.Milliseconds(), "builtin", a.builtin,
		"interpreted", interpret)
	if interpret {
		a.h.background(func() { a.upgrade(ctx, bin) })
	}
}

// check runs a freshly compiled module's checks: its capabilities against
// its exports, one warm instance reporting the ABI version, and (with
// CompileOnUse) its describe against its manifest. A module that fails
// them is closed.
func (a *Adapter) check(ctx context.Context, mod *sandbox.Module) error {
	err := mod.CheckCapabilities(core.Capabilities(a.man.Capabilities))
	if err == nil {
		err = mod.Warm(ctx, a.man.ABIVersion)
	}
	if err == nil && a.h.cfg.CompileOnUse {
		err = a.checkDescribe(ctx, mod)
	}
	if err != nil {
		_ = mod.Close(context.Background())
	}
	return err
}

// upgrade compiles the module that runs interpreted and, once it passes
// the same checks, puts it in place of the interpreted one, which closes
// when its calls in flight end. Should compiling fail, the module goes on
// interpreted, and the next start compiles it again.
func (a *Adapter) upgrade(ctx context.Context, bin []byte) {
	info := LoadInfo{CompileCache: "off"}
	mod, err := a.h.compile(ctx, a.name, a.man, bin, &info, false)
	if err == nil {
		err = a.check(ctx, mod)
	}
	if err != nil {
		if ctx.Err() == nil {
			a.h.log.Warn("provider module stays interpreted: compiling it failed", "module", a.name, "err", err)
		}
		return
	}
	a.life.RLock()
	if a.closing {
		a.life.RUnlock()
		_ = mod.Close(context.Background())
		return
	}
	old := a.mod.Swap(mod)
	a.life.RUnlock()
	a.h.log.Info("provider module now runs compiled", "module", a.name, "compile_cache", info.CompileCache,
		"compile_ms", info.CompileTime.Milliseconds())
	_ = old.Close(context.Background())
}

// errUnloaded: the adapter was closed before anything used it.
var errUnloaded = errors.New("unloaded before its first use")

func (a *Adapter) isWanted() bool {
	select {
	case <-a.wanted:
		return true
	default:
		return false
	}
}

// use marks the module as wanted: with Config.CompileOnUse it compiles now.
func (a *Adapter) use() { a.wantOnce.Do(func() { close(a.wanted) }) }

// checkDescribe runs the module's describe once it is compiled and refuses
// a module that contradicts its manifest (with CompileOnUse, Describe
// answered from the manifest until now).
func (a *Adapter) checkDescribe(ctx context.Context, mod *sandbox.Module) error {
	d, err := callDescribe(ctx, mod, a.man, a.policy)
	if err != nil {
		return err
	}
	if field, err := describeMismatch(a.man, d); err != nil {
		return &core.Error{
			Kind:    core.KindInternal,
			Message: fmt.Sprintf("provider module %s contradicts its manifest in describe (%s): %v", a.name, field, err),
			Err:     &ModuleError{Module: a.name, Op: wire.OpDescribe, Field: field, Err: err},
		}
	}
	return nil
}

// readManifest reads and parses the manifest of a lazily loaded module,
// not its code.
func (a *Adapter) readManifest() error {
	f, err := a.open()
	if err != nil {
		close(a.parsed)
		return err
	}
	defer f.Close()
	m, mjson, err := parseModuleFile(f)
	if err == nil && m.Name != a.name {
		err = fmt.Errorf("the module calls itself %q", m.Name)
	}
	if err != nil {
		close(a.parsed)
		return err
	}
	a.setModule(m, mjson, nil)
	return nil
}

// readCode reads the whole of a lazily loaded module to compile it. Its
// SHA-256, if already reported, must not have changed since.
func (a *Adapter) readCode() ([]byte, error) {
	f, err := a.open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bin, err := io.ReadAll(io.LimitReader(f, MaxModuleBytes+1))
	if err != nil {
		return nil, err
	}
	sum := sha256Hex(bin)
	a.shaOnce.Do(func() { a.sha = sum })
	if sum != a.sha {
		return nil, errors.New("its bytes changed since its manifest was read")
	}
	return bin, nil
}

// fail records why the module could not be loaded.
func (a *Adapter) fail(ctx context.Context, err error) {
	kind := core.KindInternal // the module is unusable until replaced
	if ctx.Err() != nil || errors.Is(err, errUnloaded) {
		kind = core.KindUnavailable // the host is shutting down
	}
	a.loadErr = &core.Error{Kind: kind, Message: fmt.Sprintf("provider module %s could not be loaded: %v", a.name, err), Err: err}
	if kind == core.KindUnavailable {
		if a.h.cfg.CompileOnUse && !a.isWanted() {
			return // never used: there was nothing to load
		}
		a.h.log.Info("provider module not loaded: shutting down", "module", a.name)
		return
	}
	a.h.log.Error("provider module not loaded", "module", a.name, "err", err)
}

// compile serialises compiles, counting cache entries around each so the
// outcome (hit or miss) can be reported.
//
// With interpret the module is prepared for wazero's interpreter instead,
// a few hundred milliseconds rather than seconds, and nothing is cached.
func (h *Host) compile(ctx context.Context, name string, m *manifest.Manifest, bin []byte, info *LoadInfo, interpret bool) (*sandbox.Module, error) {
	h.compileMu.Lock()
	defer h.compileMu.Unlock()
	opts := sandbox.Options{Name: name, Limits: m.Limits, PoolSize: h.cfg.PoolSize, Logger: h.log, Interpreter: interpret}
	if interpret {
		start := time.Now()
		if h.cfg.Progress != nil {
			h.cfg.Progress(fmt.Sprintf("provider module %s runs interpreted while it compiles (first use on this data dir, ~2 s; cached for later runs)", name))
		}
		mod, err := sandbox.Compile(ctx, bin, opts)
		info.CompileTime, info.CompileCache = time.Since(start), "off"
		return mod, err
	}
	cache, err := h.compilationCache()
	if err != nil {
		return nil, err
	}
	opts.Cache = cache
	before := h.cacheEntries()
	start := time.Now()
	seen := h.seenMarker(bin)
	slow := !fileExists(seen)
	if h.cfg.Progress != nil && slow {
		h.cfg.Progress(fmt.Sprintf("compiling provider module %s (first use on this data dir, ~2 s; cached for later runs)...", name))
	}
	mod, err := sandbox.Compile(ctx, bin, opts)
	info.CompileTime = time.Since(start)
	if err != nil {
		return nil, err
	}
	if h.cfg.Progress != nil && slow {
		h.cfg.Progress(fmt.Sprintf("compiled provider module %s in %s", name, info.CompileTime.Round(100*time.Millisecond)))
	}
	if before >= 0 {
		info.CompileCache = "hit"
		if h.cacheEntries() > before {
			info.CompileCache = "miss"
		}
	}
	if seen != "" && !fileExists(seen) {
		if err := os.MkdirAll(filepath.Dir(seen), 0o700); err == nil {
			_ = os.WriteFile(seen, nil, 0o600)
		}
	}
	return mod, nil
}

// compiledBefore reports whether bin was compiled into the cache dir by an
// earlier compile (so compiling it now is a cache hit).
func (h *Host) compiledBefore(bin []byte) bool { return fileExists(h.seenMarker(bin)) }

// seenDir, under the cache dir, holds one empty file per module (by
// SHA-256) compiled into the cache, so that a compile can tell beforehand
// whether it will be slow and say so. It is not counted as cache entries.
const seenDir = "compiled"

func (h *Host) seenMarker(bin []byte) string {
	if h.cfg.CacheDir == "" {
		return ""
	}
	sum := sha256.Sum256(bin)
	return filepath.Join(h.cfg.CacheDir, seenDir, hex.EncodeToString(sum[:]))
}

func fileExists(path string) bool {
	if path == "" {
		return false
	}
	_, err := os.Stat(path)
	return err == nil
}

// Name returns the module's name.
func (a *Adapter) Name() string { return a.name }

// Builtin reports whether the module is first-party, embedded in the binary.
func (a *Adapter) Builtin() bool { return a.builtin }

// Summary describes the module as Inspect does.
// A lazily loaded first-party module is read first (see Host.Start).
func (a *Adapter) Summary() Summary {
	a.h.Start()
	<-a.parsed
	if a.man == nil {
		return Summary{Name: a.name, Builtin: a.builtin}
	}
	return summarize(a.man, a.sha256(), a.builtin)
}

func (a *Adapter) sha256() string {
	a.shaOnce.Do(func() {
		if a.open == nil {
			a.sha = sha256Hex(a.bin)
			return
		}
		a.sha = a.hashFile()
	})
	return a.sha
}

// Wait blocks until the module is compiled and ready, or failed to load,
// or ctx is done.
func (a *Adapter) Wait(ctx context.Context) (LoadInfo, error) {
	a.h.Start() // a caller is waiting: compiling may not be held any longer
	a.use()
	select {
	case <-a.ready:
		return a.info, moduleFault(a.name, "load", a.loadErr)
	case <-ctx.Done():
		return LoadInfo{}, &core.Error{Kind: core.KindUnavailable, Message: "provider module " + a.name + " is still loading", Err: ctx.Err()}
	}
}

// Prepare implements core.Preparer: it compiles the module if it is not
// yet (its first use), so that adding an account times the provider's
// answer, not the compile.
func (a *Adapter) Prepare(ctx context.Context) error {
	_, err := a.Wait(ctx)
	return err
}

// Stats returns the module's pool counters (zero before it is loaded).
func (a *Adapter) Stats() Stats {
	select {
	case <-a.ready:
		if mod := a.mod.Load(); mod != nil {
			st := mod.Stats()
			return Stats{Live: st.Live, Idle: st.Idle, Created: st.Created, Discarded: st.Discarded, Calls: st.Calls}
		}
	default:
	}
	return Stats{}
}

// close stops new calls, waits for the ones in flight and closes the
// module's runtime.
func (a *Adapter) close(ctx context.Context) error {
	a.h.forget(a)
	a.h.Start()
	a.unloadOnce.Do(func() { close(a.unloaded) })
	select {
	case <-a.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	a.life.Lock()
	defer a.life.Unlock()
	if a.closing {
		return nil
	}
	a.closing = true
	if mod := a.mod.Load(); mod != nil {
		return mod.Close(ctx)
	}
	return nil
}

// call runs op on the module. A call that found the module closed before
// reaching it (nothing ran) because the compiled twin has just replaced it
// goes to the replacement.
func (a *Adapter) call(ctx context.Context, op string, raw []byte, hc *hostcall.Call) ([]byte, error) {
	for {
		mod := a.mod.Load()
		res, err := mod.Call(ctx, op, raw, hc)
		if err != nil && errors.Is(err, sandbox.ErrClosed) && a.mod.Load() != mod {
			continue
		}
		return res, err
	}
}

// inputBufs recycles the buffers op inputs are encoded into; the sandbox
// copies an input into module memory before the call returns.
var inputBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// invoke runs op for acct (nil for describe) with the box id or spec the
// op takes; decode reads the module's result, filling the caller's output
// and returning the error member.
//
// check, when set, runs on a successful result with the call's
// credentials at hand, to apply the credential rule to what the module
// returned (see checkBox). Every error comes back named (moduleFault).
func (a *Adapter) invoke(ctx context.Context, op string, acct *core.Account, boxID string, spec *core.CreateSpec, decode func([]byte) (*wire.ErrorBody, error), check func(*hostcall.Call) error) error {
	obs := a.h.cfg.Observe
	if obs == nil {
		return moduleFault(a.name, op, a.invoke1(ctx, op, acct, boxID, spec, decode, check))
	}
	start := time.Now()
	err := moduleFault(a.name, op, a.invoke1(ctx, op, acct, boxID, spec, decode, check))
	obs(a.name, op, time.Since(start), err)
	return err
}

func (a *Adapter) invoke1(ctx context.Context, op string, acct *core.Account, boxID string, spec *core.CreateSpec, decode func([]byte) (*wire.ErrorBody, error), check func(*hostcall.Call) error) error {
	if _, err := a.Wait(ctx); err != nil {
		return err
	}
	a.life.RLock()
	defer a.life.RUnlock()
	if a.closing {
		return core.Errorf(core.KindUnavailable, "provider module %s was unloaded", a.name)
	}
	if acct != nil && acct.Provider != "" && acct.Provider != a.name {
		return core.Errorf(core.KindInvalid, "account %s belongs to provider %s, not %s", acct.ID, acct.Provider, a.name)
	}
	deadline := time.Now().Add(a.man.Limits.CallTimeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	in := wire.NewInput(deadline, acct)
	in.BoxID = boxID
	if spec != nil {
		in.Spec = wire.Spec(*spec)
	}
	buf := inputBufs.Get().(*[]byte)
	raw := wire.AppendInput((*buf)[:0], &in)
	hc := a.policy.NewCall(acct)
	res, err := a.call(ctx, op, raw, hc)
	if cap(raw) <= 64<<10 { // do not keep a big create spec around
		*buf = raw
		inputBufs.Put(buf)
	}
	if err != nil {
		return err
	}
	eb, err := decode(res)
	switch {
	case errors.Is(err, wire.ErrSyntax):
		return core.Errorf(core.KindInternal, "provider module %s returned a malformed result from %s (want {\"ok\":…} or {\"error\":…})", a.name, op)
	case err != nil:
		return core.Errorf(core.KindInternal, "provider module %s returned a malformed %s result: %s", a.name, op, wire.CleanMessage(hc.Redact(err.Error())))
	case eb != nil:
		// Redact before ToCore shortens the message: a cut secret would
		// no longer be recognised.
		eb.Message = hc.Redact(eb.Message)
		return eb.ToCore(a.name)
	}
	if check != nil {
		return check(hc)
	}
	return nil
}

// Describe returns the module's description, built from its manifest. The
// first call asks the module itself (describe) and checks that it agrees
// with the manifest; later calls answer from memory. With CompileOnUse it
// answers from the manifest alone until the module is used (the check
// then runs when it compiles).
func (a *Adapter) Describe(ctx context.Context) (core.ProviderInfo, error) {
	a.descMu.Lock()
	defer a.descMu.Unlock()
	if a.desc != nil {
		return *a.desc, nil
	}
	if a.h.cfg.CompileOnUse {
		// Answered from the manifest: listing providers must not compile
		// them. The module's own describe is checked when it compiles.
		a.h.Start()
		<-a.parsed
		if a.man == nil {
			_, err := a.Wait(ctx) // the read failed: report why
			return core.ProviderInfo{}, err
		}
		select {
		case <-a.ready:
			if a.loadErr != nil {
				return core.ProviderInfo{}, moduleFault(a.name, "load", a.loadErr)
			}
		default:
		}
		return providerInfo(a.man), nil
	}
	var d wire.DescribeOut
	if err := a.invoke(ctx, wire.OpDescribe, nil, "", nil, func(b []byte) (*wire.ErrorBody, error) { return wire.DecodeDescribe(b, &d) }, nil); err != nil {
		return core.ProviderInfo{}, err
	}
	if field, err := describeMismatch(a.man, d); err != nil {
		return core.ProviderInfo{}, &core.Error{
			Kind:    core.KindInternal,
			Message: fmt.Sprintf("provider module %s contradicts its manifest in describe (%s): %v", a.name, field, err),
			Err:     &ModuleError{Module: a.name, Op: wire.OpDescribe, Field: field, Err: err},
		}
	}
	info := providerInfo(a.man)
	a.desc = &info
	return info, nil
}

func providerInfo(m *manifest.Manifest) core.ProviderInfo {
	info := core.ProviderInfo{
		Name:         m.Name,
		Version:      m.Version,
		Description:  m.Description,
		Kind:         "wasm",
		Capabilities: core.Capabilities(m.Capabilities),
		Credentials:  []core.CredentialSpec{},
		Config:       []core.ConfigField{},
		Clocks:       wire.Clocks(m.Clocks),
	}
	if m.Endpoint != nil && m.Endpoint.SessionKey == manifest.SessionKeyProvider {
		info.ProviderSessionKey = true
	}
	for _, c := range m.Credentials {
		info.Credentials = append(info.Credentials, core.CredentialSpec{Name: c.Name, Description: c.Description, Header: c.HeaderLine()})
	}
	for _, f := range m.Config {
		info.Config = append(info.Config, core.ConfigField{Name: f.Name, Description: f.Description, Example: f.Example, Required: f.Required})
	}
	if m.Options != nil {
		info.Options = make([]core.ConfigField, 0, len(m.Options))
		for _, f := range m.Options {
			info.Options = append(info.Options, core.ConfigField{Name: f.Name, Description: f.Description, Example: f.Example})
		}
	}
	return info
}

// List implements core.Provider.
func (a *Adapter) List(ctx context.Context, acct core.Account) ([]core.Box, error) {
	var out wire.ListOut
	var boxes []core.Box
	err := a.invoke(ctx, wire.OpList, &acct, "", nil, func(b []byte) (*wire.ErrorBody, error) { return wire.DecodeList(b, &out) }, func(hc *hostcall.Call) error {
		boxes = make([]core.Box, 0, len(out.Boxes))
		for i := range out.Boxes {
			b, err := out.Boxes[i].ToCore()
			if err != nil {
				return core.Errorf(core.KindInternal, "provider module %s returned an invalid box from list: %s", a.name, wire.CleanMessage(hc.Redact(err.Error())))
			}
			if err := checkBox(hc, a.name, wire.OpList, &b); err != nil {
				return err
			}
			boxes = append(boxes, b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return boxes, nil
}

func (a *Adapter) boxOp(ctx context.Context, op string, acct core.Account, boxID string, spec *core.CreateSpec) (core.Box, error) {
	var out wire.BoxOut
	var box core.Box
	err := a.invoke(ctx, op, &acct, boxID, spec, func(b []byte) (*wire.ErrorBody, error) { return wire.DecodeBox(b, &out) }, func(hc *hostcall.Call) error {
		b, err := out.Box.ToCore()
		if err != nil {
			return core.Errorf(core.KindInternal, "provider module %s returned an invalid box from %s: %s", a.name, op, wire.CleanMessage(hc.Redact(err.Error())))
		}
		if err := checkBox(hc, a.name, op, &b); err != nil {
			return err
		}
		box = b
		return nil
	})
	if err != nil {
		return core.Box{}, err
	}
	return box, nil
}

// Get implements core.Provider.
func (a *Adapter) Get(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
	return a.boxOp(ctx, wire.OpGet, acct, boxID, nil)
}

// Create implements core.Provider.
func (a *Adapter) Create(ctx context.Context, acct core.Account, spec core.CreateSpec) (core.Box, error) {
	return a.boxOp(ctx, wire.OpCreate, acct, "", &spec)
}

// Suspend implements core.Provider.
func (a *Adapter) Suspend(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
	return a.boxOp(ctx, wire.OpSuspend, acct, boxID, nil)
}

// Resume implements core.Provider.
func (a *Adapter) Resume(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
	return a.boxOp(ctx, wire.OpResume, acct, boxID, nil)
}

// Delete implements core.Provider.
func (a *Adapter) Delete(ctx context.Context, acct core.Account, boxID string) error {
	return a.invoke(ctx, wire.OpDelete, &acct, boxID, nil, wire.DecodeEmpty, nil)
}
