package main

import (
	"context"
	"log/slog"

	"companion/core"
	"companion/db"
	"companion/providers/builtin/docker"
	"companion/secrets"
)

// localDockerAccount is the account every installation has for the local
// Docker Engine, which needs no credentials.
const localDockerAccount = "local-docker"

// providerSet is the adapters companion runs with.
type providerSet struct {
	docker *docker.Provider
}

// startProviders creates the adapters and registers them. Nothing here may
// block on a provider: an unreachable Docker Engine or a module still
// compiling must not delay the ready line.
func startProviders(ctx context.Context, f *serverFlags, store *db.Store, keys *secrets.Keyring, log *slog.Logger, reg *core.Registry) (*providerSet, error) {
	dp, err := docker.New(docker.Config{Image: f.dockerImage, Scope: f.dockerScope, Logger: log.With("provider", "docker")})
	if err != nil {
		return nil, err
	}
	reg.Register("docker", dp)
	return &providerSet{docker: dp}, nil
}

// EnsureAccounts creates the accounts that exist by default.
func (p *providerSet) EnsureAccounts(ctx context.Context, svc *core.Service) error {
	return svc.EnsureAccount(ctx, core.Account{ID: localDockerAccount, Provider: "docker", Label: "Local Docker"})
}

// Close releases the adapters.
func (p *providerSet) Close() error {
	return p.docker.Close()
}
