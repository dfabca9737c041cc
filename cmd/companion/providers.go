package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"path/filepath"

	"companion/core"
	"companion/db"
	"companion/providers/builtin/docker"
	"companion/providers/wasm"
	"companion/secrets"
)

// localDockerAccount is the account every installation has for the local
// Docker Engine, which needs no credentials.
const localDockerAccount = "local-docker"

// providerSet is the adapters companion runs with: the built-in docker
// adapter and the Wasm modules (first-party ones embedded in the binary,
// and third-party ones installed under the data dir).
type providerSet struct {
	docker *docker.Provider
	host   *wasm.Host
	reg    *core.Registry
	svc    *core.Service
	log    *slog.Logger
}

// newWasmHost makes the Wasm host for a data directory.
func newWasmHost(dataDir string, store *db.Store, keys core.Secrets, log *slog.Logger) (*wasm.Host, error) {
	return wasm.New(wasm.Config{
		CacheDir:      filepath.Join(dataDir, "wasm-cache"),
		ModulesDir:    filepath.Join(dataDir, "modules"),
		Pins:          store,
		Credentials:   wasm.FromSecrets(keys),
		Logger:        log.With("component", "wasm"),
		ReservedNames: []string{"docker"},
		// Compiling takes a CPU for about a second per module; it starts
		// once companion is serving (see Start), or at a module's first use.
		DeferCompile: true,
	})
}

// startProviders creates the adapters and registers them. Nothing here may
// block on a provider: an unreachable Docker Engine or a module still
// compiling must not delay the ready line (modules compile in the
// background; the first call to one waits for it).
func startProviders(ctx context.Context, f *serverFlags, store *db.Store, keys *secrets.Keyring, log *slog.Logger, reg *core.Registry) (*providerSet, error) {
	dp, err := docker.New(docker.Config{Image: f.dockerImage, Scope: f.dockerScope, Logger: log.With("provider", "docker")})
	if err != nil {
		return nil, err
	}
	reg.Register("docker", dp)
	host, err := newWasmHost(f.dataDir, store, keys, log)
	if err != nil {
		return nil, err
	}
	ps := &providerSet{docker: dp, host: host, reg: reg, log: log}
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

// Start lets the Wasm modules compile; call it once companion serves.
func (p *providerSet) Start() { p.host.Start() }

// EnsureAccounts creates the accounts that exist by default and remembers
// the service for module removal checks.
func (p *providerSet) EnsureAccounts(ctx context.Context, svc *core.Service) error {
	p.svc = svc
	return svc.EnsureAccount(ctx, core.Account{ID: localDockerAccount, Provider: "docker", Label: "Local Docker"})
}

// Close releases the adapters.
func (p *providerSet) Close() error {
	ctx := context.Background()
	return errors.Join(p.host.Close(ctx), p.docker.Close())
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

// Remove implements uibridge.ModuleAdmin. A module still used by an
// account is kept: removing it would strand the account's workspaces.
func (p *providerSet) Remove(ctx context.Context, name string) error {
	if name == "docker" {
		return core.Errorf(core.KindInvalid, "docker is built into companion and cannot be removed")
	}
	if p.svc != nil {
		accts, err := p.svc.Accounts(ctx, "")
		if err != nil {
			return err
		}
		for _, a := range accts {
			if a.Provider == name {
				return core.Errorf(core.KindConflict, "provider module %s is used by account %s (%s); remove the account first", name, a.ID, a.Label)
			}
		}
	}
	if err := p.host.Remove(ctx, name); err != nil {
		return err
	}
	p.reg.Unregister(name)
	return nil
}
