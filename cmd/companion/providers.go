package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker"
	"github.com/canvasapp/companion/providers/builtin/modal"
	"github.com/canvasapp/companion/providers/wasm"
)

// localDockerAccount is the account every installation has for the local
// Docker Engine, which needs no credentials.
const localDockerAccount = "local-docker"

// builtinNames are the providers built into the binary; no module may
// take their names.
var builtinNames = []string{"docker", "modal"}

// providerSet is the adapters companion runs with: the built-in docker
// and modal adapters and the Wasm modules (first-party ones embedded in the binary,
// and third-party ones installed under the data dir).
type providerSet struct {
	docker *docker.Provider
	modal  *modal.Provider
	host   *wasm.Host
	store  core.Store
	reg    *core.Registry
	log    *slog.Logger
	scope  string

	// mu orders installs, removals and Sync on this replica, so that
	// the registry ends up holding what the host loaded.
	mu sync.Mutex
}

// newWasmHost makes the Wasm host for a data directory.
// On PostgreSQL (a store that keeps modules' bytes) installed modules
// live in the database, shared by every replica; on SQLite they are files
// in the data dir.
func newWasmHost(dataDir string, store wasm.PinStore, keys core.Secrets, log *slog.Logger, observe func(module, op string, d time.Duration, err error)) (*wasm.Host, error) {
	return wasm.New(wasm.Config{
		CacheDir:      filepath.Join(dataDir, "wasm-cache"),
		ModulesDir:    filepath.Join(dataDir, "modules"),
		Pins:          store,
		Credentials:   wasm.FromSecrets(keys),
		Logger:        log.With("component", "wasm"),
		ReservedNames: builtinNames,
		Progress:      func(line string) { log.Info(line) },
		// Manifests are read once companion is serving (see Start); a
		// module is compiled (about two seconds of a CPU, once per data
		// dir) only when an account first uses it, and a first-party one
		// runs interpreted meanwhile.
		DeferCompile:   true,
		CompileOnUse:   true,
		InterpretFirst: true,
		Observe:        observe,
	})
}

// startProviders creates the adapters and registers them. Nothing here may
// block on a provider: an unreachable Docker Engine or a module still
// compiling must not delay the ready line (a module compiles at its first
// use, and that call waits for it).
// observe and wasmObserve, when set, are told about every call of the
// Docker adapter and of the Wasm modules (metrics).
func startProviders(ctx context.Context, f *serverFlags, store serverStore, keys core.Secrets, log *slog.Logger, reg *core.Registry, observe, wasmObserve func(provider, op string, d time.Duration, err error)) (*providerSet, error) {
	var dockerObserve func(op string, d time.Duration, err error)
	if observe != nil {
		dockerObserve = func(op string, d time.Duration, err error) { observe("docker", op, d, err) }
	}
	dp, err := docker.New(docker.Config{Image: f.dockerImage, ImageFlag: "--docker-image", Scope: f.dockerScope, Logger: log, Observe: dockerObserve})
	if err != nil {
		return nil, err
	}
	reg.Register("docker", dp)
	// Modal speaks gRPC, which the Wasm host cannot carry: it is built in.
	// Its tokens come from the secret store, like a module's.
	var modalObserve func(op string, d time.Duration, err error)
	if observe != nil {
		modalObserve = func(op string, d time.Duration, err error) { observe("modal", op, d, err) }
	}
	mp := modal.New(modal.Config{Secrets: keys, Logger: log, Observe: modalObserve})
	reg.Register("modal", mp)
	host, err := newWasmHost(f.dataDir, store, keys, log, wasmObserve)
	if err != nil {
		return nil, err
	}
	ps := &providerSet{docker: dp, modal: mp, host: host, store: store, reg: reg, log: log, scope: f.dockerScope}
	loadFirstParty(host, reg, log)
	adapters, err := host.LoadInstalled(ctx)
	for _, a := range adapters {
		reg.Register(a.Name(), a)
	}
	if err != nil {
		log.Error("some installed provider modules were not loaded", "err", err)
	}
	return ps, nil
}

// Start lets the Wasm host read the modules' manifests; call it once
// companion serves.
func (p *providerSet) Start() { p.host.Start() }

// EnsureAccounts creates the accounts that exist by default. The local
// Docker account remembers the docker scope it was created with: started
// with another scope, companion would see none of its boxes and report
// every one as deleted, so that is refused.
func (p *providerSet) EnsureAccounts(ctx context.Context, svc *core.Service) error {
	acct, err := svc.EnsureAccount(ctx, core.Account{ID: localDockerAccount, Provider: "docker", Label: "Local Docker",
		Config: map[string]string{"scope": p.scope}})
	if err != nil {
		return err
	}
	if have := acct.Config["scope"]; have != "" && have != p.scope {
		return fmt.Errorf("this data dir manages the Docker boxes of scope %q, not %q: start with --docker-scope %s, or use another --data-dir", have, p.scope, have)
	}
	return nil
}

// Close releases the adapters.
func (p *providerSet) Close() error {
	ctx := context.Background()
	return errors.Join(p.host.Close(ctx), p.docker.Close(), p.modal.Close())
}

// Inspect implements uibridge.ModuleAdmin.
func (p *providerSet) Inspect(ctx context.Context, module []byte) (any, error) {
	return p.host.Inspect(ctx, module)
}

// Install implements uibridge.ModuleAdmin: it installs the module only if
// its bytes are the ones the person confirmed, then loads and registers it.
func (p *providerSet) Install(ctx context.Context, module []byte, confirmed string) (any, error) {
	sum := sha256.Sum256(module)
	if got := hex.EncodeToString(sum[:]); got != confirmed {
		return nil, core.Errorf(core.KindConflict, "the module's SHA-256 is %s, not the %s you confirmed; inspect it again", got, confirmed)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s, err := p.host.Install(ctx, module)
	if err != nil {
		return nil, err
	}
	a, err := p.host.Load(ctx, s.Name)
	if err != nil {
		return nil, err
	}
	p.reg.Register(a.Name(), a)
	return s, nil
}

// Remove implements uibridge.ModuleAdmin.
func (p *providerSet) Remove(ctx context.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := checkRemovable(ctx, p.host, p.store, name); err != nil {
		return err
	}
	if err := p.host.Remove(ctx, name); err != nil {
		return err
	}
	p.reg.Unregister(name)
	return nil
}

// Sync loads the modules installed through other replicas (or with
// `companion providers install --database-file`) since the last Sync and
// unloads the ones removed, registering and unregistering them. It does
// nothing on SQLite, whose modules are this server's alone.
func (p *providerSet) Sync(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	loaded, removed, err := p.host.Sync(ctx)
	for _, a := range loaded {
		p.reg.Register(a.Name(), a)
	}
	for _, name := range removed {
		p.reg.Unregister(name)
	}
	return err
}

// RunSync calls Sync every interval until ctx ends, on PostgreSQL; on
// SQLite it returns at once. A failed Sync is logged (by the host, for a
// module that does not load) and retried at the next interval.
func (p *providerSet) RunSync(ctx context.Context, interval time.Duration) {
	if !p.host.Shared() {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := p.Sync(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("provider modules not followed", "err", err)
		}
	}
}

// checkRemovable refuses to remove a built-in provider, and a module still
// used by an account of any owner: removing it would strand the account's
// workspaces.
func checkRemovable(ctx context.Context, host *wasm.Host, store core.Store, name string) error {
	if slices.Contains(builtinNames, name) {
		return core.Errorf(core.KindInvalid, "%s is built into companion and cannot be removed", name)
	}
	if a, ok := host.Adapter(name); ok && a.Builtin() {
		return core.Errorf(core.KindInvalid, "provider module %s is built into companion and cannot be removed", name)
	}
	users, err := core.AccountsUsing(ctx, store, name)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return core.Errorf(core.KindConflict, "provider module %s is used by account %s (%s); remove the account first", name, users[0].ID, users[0].Label)
	}
	return nil
}
