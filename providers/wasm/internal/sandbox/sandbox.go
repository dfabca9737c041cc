// Package sandbox runs one module under wazero: its own runtime (and so its
// own memory cap), close-on-context-done always on, a deadline on every
// call, a bounded pool of warm instances, and no filesystem, environment or
// arguments. An instance that trapped, timed out, exited or broke a host
// rule is closed and never reused.
package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/providers/wasm/internal/wire"
)

// Options configure a Module.
type Options struct {
	Name   string
	Limits manifest.Limits
	// PoolSize is the most instances alive at once (and so the most calls
	// in flight); 0 means 2.
	PoolSize int
	// MaxCalls retires an instance after this many calls, bounding how far
	// a guest heap can drift; 0 means 5000.
	MaxCalls int
	// Cache is the compilation cache shared by every module; nil means no
	// cache. Every runtime using it must have close-on-context-done on,
	// because wazero's cache key does not include that setting.
	Cache  wazero.CompilationCache
	Logger *slog.Logger
	// Interpreter runs the module in wazero's interpreter instead of its
	// compiler: compiling takes a fifth of the time, calls take several
	// times longer, and nothing goes into Cache.
	Interpreter bool
}

// Module is one compiled module and its pool of instances.
type Module struct {
	opts    Options
	rt      wazero.Runtime
	cm      wazero.CompiledModule
	modCfg  wazero.ModuleConfig
	has     map[string]bool // exported ops
	budget  *budget
	log     *slog.Logger
	sem     chan struct{}
	mu      sync.Mutex
	idle    []*instance
	done    chan struct{} // closed by Close, under mu
	created atomic.Int64
	discard atomic.Int64
	calls   atomic.Int64
}

// Stats count a pool's instances.
type Stats struct {
	Live      int   // instances alive now (idle + busy)
	Idle      int   // instances waiting for a call
	Created   int64 // instances created so far
	Discarded int64 // instances thrown away after a failure
	Calls     int64 // calls that reached an instance
}

// Compile makes a runtime for the module, compiles it (through the cache)
// and checks its imports and exports against the ABI.
func Compile(ctx context.Context, bin []byte, opts Options) (*Module, error) {
	if opts.PoolSize <= 0 {
		opts.PoolSize = 2
	}
	if opts.MaxCalls <= 0 {
		opts.MaxCalls = 5000
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := wazero.NewRuntimeConfig()
	if opts.Interpreter {
		cfg = wazero.NewRuntimeConfigInterpreter()
	}
	cfg = cfg.WithCloseOnContextDone(true).
		WithMemoryLimitPages(opts.Limits.MemoryPages())
	if opts.Cache != nil && !opts.Interpreter {
		cfg = cfg.WithCompilationCache(opts.Cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	m := &Module{
		opts: opts,
		rt:   rt,
		log:  opts.Logger.With("module", opts.Name),
		sem:  make(chan struct{}, opts.PoolSize),
		done: make(chan struct{}),
	}
	if err := m.setup(ctx, bin); err != nil {
		_ = rt.Close(context.Background())
		return nil, err
	}
	return m, nil
}

func (m *Module) setup(ctx context.Context, bin []byte) error {
	// Check first: nothing the binary declares may make the compiler or
	// the runtime allocate past the module's budget.
	chk, err := Check(bin, m.opts.Limits)
	if err != nil {
		return err
	}
	m.has = chk.Has
	m.budget = newBudget(m.opts.Limits, chk.Shape, m.opts.PoolSize)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt); err != nil {
		return fmt.Errorf("wasi: %w", err)
	}
	if err := hostcall.Instantiate(ctx, m.rt); err != nil {
		return fmt.Errorf("host functions: %w", err)
	}
	cm, err := m.rt.CompileModule(ctx, chk.Bin)
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "over limit") || strings.Contains(msg, "exceeds") && strings.Contains(msg, "page") {
			return fmt.Errorf("module needs more memory than its manifest allows (limits.memory_mib = %d): %v", m.opts.Limits.MemoryMiB, err)
		}
		return fmt.Errorf("compile: %w", err)
	}
	m.cm = cm
	m.modCfg = wazero.NewModuleConfig().
		WithName(""). // anonymous, so many instances can coexist
		WithStartFunctions("_initialize").
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(sliceSleep).
		WithRandSource(rand.Reader)
	return nil
}

// sliceSleep sleeps for real but at most 10 ms at a time: a host function
// is not interrupted by close-on-context-done, so a guest asking to sleep
// for an hour must come back often enough to be stopped at its deadline.
func sliceSleep(ns int64) {
	const slice = 10 * time.Millisecond
	d := time.Duration(ns)
	if d > slice {
		d = slice
	}
	if d > 0 {
		time.Sleep(d)
	}
}

// CheckCapabilities refuses capability flags the module's exports cannot
// back.
func (m *Module) CheckCapabilities(c core.Capabilities) error { return checkCaps(m.has, c) }

func checkCaps(has map[string]bool, c core.Capabilities) error {
	need := func(flag, op string) error {
		if !has[op] {
			return fmt.Errorf("manifest declares capabilities.%s but the module does not export %s", flag, wire.OpExport(op))
		}
		return nil
	}
	if c.Suspend {
		if err := need("suspend", wire.OpSuspend); err != nil {
			return err
		}
		if err := need("suspend", wire.OpResume); err != nil {
			return err
		}
	}
	if c.Delete {
		return need("delete", wire.OpDelete)
	}
	return nil
}

// Has reports whether the module implements op.
func (m *Module) Has(op string) bool { return m.has[op] }

// Warm creates one instance, checks the ABI version it reports against
// want, and keeps it in the pool.
func (m *Module) Warm(ctx context.Context, want int) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.Limits.CallTimeout())
	defer cancel()
	inst, err := m.acquire(ctx)
	if err != nil {
		return err
	}
	res, err := inst.abi.Call(ctx)
	bad := err != nil
	m.flush(inst, nil, bad)
	m.release(inst, bad)
	if err != nil {
		return fmt.Errorf("%s failed: %w", wire.ExportABIVersion, err)
	}
	got := int32(api.DecodeI32(res[0]))
	switch {
	case got <= 0:
		return fmt.Errorf("%s returned %d; it must return the ABI version the module was built for", wire.ExportABIVersion, got)
	case int(got) > manifest.ABIVersion:
		return fmt.Errorf("module is built for ABI version %d, but this companion implements up to %d; update companion", got, manifest.ABIVersion)
	case int(got) != want:
		return fmt.Errorf("module reports ABI version %d but its manifest says abi_version %d", got, want)
	}
	return nil
}

// Call runs op with input on a pooled instance under the module's
// deadline, hc attached for the host functions. It returns the bytes the
// op produced; failures are *core.Error values whose messages name the
// module and op.
func (m *Module) Call(ctx context.Context, op string, input []byte, hc *hostcall.Call) ([]byte, error) {
	if !m.has[op] {
		return nil, core.Errorf(core.KindInvalid, "provider module %s does not implement %s", m.opts.Name, op)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, m.opts.Limits.CallTimeout())
	defer cancel()
	ctx = hostcall.WithCall(ctx, hc)
	inst, err := m.acquire(ctx)
	if err != nil {
		return nil, m.callError(parent, op, err, nil)
	}
	m.calls.Add(1)
	out, err := inst.run(ctx, op, input)
	bad := err != nil || hc.Violation() != nil || inst.mod.IsClosed()
	stderr := m.flush(inst, hc, bad)
	m.release(inst, bad)
	if v := hc.Violation(); v != nil {
		return nil, &core.Error{
			Kind:    core.KindInternal,
			Message: fmt.Sprintf("provider module %s broke a sandbox rule during %s and was stopped: %s", m.opts.Name, op, hc.Redact(v.Error())),
			Err:     v,
		}
	}
	if err != nil {
		return nil, m.callError(parent, op, err, stderr)
	}
	return out, nil
}

// callError turns a failed call into a *core.Error people can act on.
func (m *Module) callError(parent context.Context, op string, err error, stderr []byte) error {
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	if perr := parent.Err(); perr != nil {
		return &core.Error{Kind: core.KindUnavailable, Message: fmt.Sprintf("%s on provider module %s was cancelled", op, m.opts.Name), Err: perr}
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) || errors.Is(err, context.DeadlineExceeded) {
		if exit == nil || exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled {
			return &core.Error{Kind: core.KindUnavailable, Message: fmt.Sprintf("provider module %s did not finish %s within %s and was stopped", m.opts.Name, op, m.opts.Limits.CallTimeout()), Err: fmt.Errorf("%w: %w", ErrTimeBudget, err)}
		}
		return &core.Error{Kind: core.KindInternal, Message: fmt.Sprintf("provider module %s exited (code %d) during %s", m.opts.Name, exit.ExitCode(), op), Err: err}
	}
	if strings.Contains(string(stderr), "all goroutines are asleep") {
		return &core.Error{Kind: core.KindInternal, Message: fmt.Sprintf("provider module %s blocked forever (deadlock) during %s and was stopped", m.opts.Name, op), Err: err}
	}
	if strings.Contains(string(stderr), "out of memory") {
		return &core.Error{Kind: core.KindInternal, Message: fmt.Sprintf("provider module %s ran out of memory during %s (limit %d MiB) and was stopped", m.opts.Name, op, m.opts.Limits.MemoryMiB), Err: fmt.Errorf("%w: %w", ErrMemoryBudget, err)}
	}
	return &core.Error{Kind: core.KindInternal, Message: fmt.Sprintf("provider module %s failed during %s and was stopped: %s", m.opts.Name, op, firstLine(err.Error())), Err: err}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return wire.CleanMessage(s)
}

// ErrTimeBudget and ErrMemoryBudget are in the error of a call the module
// was stopped in for running past its call timeout or its memory.
var (
	ErrTimeBudget   = errors.New("the module exceeded its time budget")
	ErrMemoryBudget = errors.New("the module exceeded its memory budget")
)

// ErrClosed is in the error of a call that found its module closed before
// it reached an instance: nothing of the call ran.
var ErrClosed = errors.New("module is closed")

func (m *Module) acquire(ctx context.Context) (*instance, error) {
	select {
	case m.sem <- struct{}{}:
	case <-m.done:
		return nil, m.closedErr()
	case <-ctx.Done():
		return nil, &core.Error{Kind: core.KindUnavailable, Message: fmt.Sprintf("provider module %s is busy (%d calls in flight)", m.opts.Name, m.opts.PoolSize), Err: ctx.Err()}
	}
	m.mu.Lock()
	if m.closed() {
		m.mu.Unlock()
		<-m.sem
		return nil, m.closedErr()
	}
	for len(m.idle) > 0 {
		inst := m.idle[len(m.idle)-1]
		m.idle = m.idle[:len(m.idle)-1]
		if !inst.mod.IsClosed() {
			m.mu.Unlock()
			return inst, nil
		}
		m.discard.Add(1)
	}
	m.mu.Unlock()
	inst, err := m.instantiate(ctx)
	if err != nil {
		<-m.sem
		return nil, err
	}
	return inst, nil
}

func (m *Module) release(inst *instance, bad bool) {
	defer func() { <-m.sem }()
	inst.calls++
	m.mu.Lock()
	// An instance that grew past its pooled share is closed, which
	// unmaps its memory: an idle module holds at most PoolSize shares.
	grown := uint64(inst.mem.Size()) > m.budget.pooled
	keep := !bad && !grown && !m.closed() && inst.calls < m.opts.MaxCalls && !inst.mod.IsClosed()
	if keep {
		m.idle = append(m.idle, inst)
	}
	m.mu.Unlock()
	if !keep {
		if bad || grown {
			m.discard.Add(1)
		}
		_ = inst.mod.Close(context.Background())
	}
}

// Stats returns the pool's counters.
func (m *Module) Stats() Stats {
	m.mu.Lock()
	idle := len(m.idle)
	m.mu.Unlock()
	return Stats{
		Live:      idle + len(m.sem),
		Idle:      idle,
		Created:   m.created.Load(),
		Discarded: m.discard.Load(),
		Calls:     m.calls.Load(),
	}
}

// MemoryBytes returns the linear memory size of each idle instance.
func (m *Module) MemoryBytes() []uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]uint32, 0, len(m.idle))
	for _, inst := range m.idle {
		out = append(out, inst.mem.Size())
	}
	return out
}

// Close closes every instance and the runtime, which unmaps their memory.
// It first waits for calls in flight (each bounded by its deadline): an
// instance's memory must not be unmapped under a running call. If ctx ends
// first, Close returns and the runtime is closed when those calls finish.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed() {
		m.mu.Unlock()
		return nil
	}
	close(m.done)
	m.idle = nil
	m.mu.Unlock()
	held := 0
	finish := func() error {
		for ; held < cap(m.sem); held++ {
			m.sem <- struct{}{}
		}
		return m.rt.Close(context.Background())
	}
	for ; held < cap(m.sem); held++ {
		select {
		case m.sem <- struct{}{}:
		case <-ctx.Done():
			go finish()
			return ctx.Err()
		}
	}
	return finish()
}

// closed reports whether Close has begun.
func (m *Module) closed() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func (m *Module) closedErr() error {
	return &core.Error{Kind: core.KindUnavailable, Message: "provider module " + m.opts.Name + " was unloaded", Err: ErrClosed}
}

// Memory reports the module's budget and the linear memory its instances
// have mapped now and at most so far, in bytes.
func (m *Module) Memory() MemoryStats {
	return MemoryStats{
		BudgetBytes:    m.budget.limit,
		ShareBytes:     m.budget.share,
		PooledBytes:    m.budget.pooled,
		CommittedBytes: uint64(m.budget.committed.Load()),
		PeakBytes:      uint64(m.budget.peak.Load()),
	}
}

// MemoryStats describe a module's host memory budget and use.
type MemoryStats struct {
	BudgetBytes    uint64 // every pooled instance's linear memory and tables
	ShareBytes     uint64 // one instance's memory limit and tables
	PooledBytes    uint64 // the most linear memory an instance may keep when pooled
	CommittedBytes uint64 // linear memory mapped now
	PeakBytes      uint64
}

// Prewarm makes sure n instances (at most the pool size) are alive and
// idle, creating the missing ones.
func (m *Module) Prewarm(ctx context.Context, n int) error {
	if n > m.opts.PoolSize {
		n = m.opts.PoolSize
	}
	var held []*instance
	defer func() {
		for _, inst := range held {
			m.release(inst, false)
		}
	}()
	for i := 0; i < n; i++ {
		inst, err := m.acquire(ctx)
		if err != nil {
			return err
		}
		held = append(held, inst)
	}
	return nil
}
