package main

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/canvasapp/companion/agentproxy"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/exportrun"
	"github.com/canvasapp/companion/metrics"
	"github.com/canvasapp/companion/providers/wasm"
	"github.com/canvasapp/companion/restorerun"
	uibridge "github.com/canvasapp/companion/ui-bridge"
	"github.com/canvasapp/companion/webhooks"
)

// started is what serve opens before it can answer requests: the stores,
// the providers and the service, and the bridge's configuration. Fields
// stay nil until opened, so close releases exactly what open got to.
type started struct {
	store     serverStore
	registry  core.Registry
	provs     *providerSet
	exporter  *exportrun.Exporter
	svc       *core.Service
	keys      core.Secrets
	metrics   *metrics.Metrics
	hooks     *webhooks.Hooks // serve only
	bridgeCfg uibridge.Config
}

// open opens the store, the secret store and the providers, builds the
// service, creates the default accounts and checks the bridge's
// configuration. addr is the address serve listens on; token the launch
// token ("" when users sign in).
func (a *started) open(ctx context.Context, m mode, f *serverFlags, log *slog.Logger, addr net.Addr, token string) error {
	store, err := openServerStore(ctx, f)
	if err != nil {
		return err
	}
	a.store = store
	use := useServer
	if m == modeDesktop {
		use = useDesktop
	}
	keys, err := openSecretStore(ctx, use, f.secrets, store, log)
	if err != nil {
		return err
	}
	a.keys = keys
	a.metrics = metrics.New()
	observe := func(provider, op string, d time.Duration, err error) { a.metrics.ProviderCall(provider, op, d, err) }
	wasmObserve := func(module, op string, d time.Duration, err error) {
		a.metrics.WasmCall(module, op, d, wasm.CallOutcome(err))
		a.metrics.ProviderCall(module, op, d, err)
	}
	if a.provs, err = startProviders(ctx, f, store, keys, log, &a.registry, observe, wasmObserve); err != nil {
		return err
	}
	if a.exporter, err = newExporter(ctx, m, f, keys, log); err != nil {
		return err
	}
	hook, err := crashHook(log)
	if err != nil {
		return err
	}
	a.exporter.Staged, a.exporter.Uploaded = exportHook(log), uploadHook(log)
	exportLocation := ""
	if m == modeDesktop {
		exportLocation = a.exporter.Writer.Root // serve mode keeps its paths to itself
		if f.exportStore != "" {
			exportLocation = redactedURL(f.exportStore)
		}
	}
	var events core.EventSink
	if m == modeServe {
		if a.hooks, err = newWebhooks(f, store, keys, log, a.metrics, addr); err != nil {
			return err
		}
		events = a.hooks
	}
	users := f.login.users(store)
	a.svc, err = core.NewService(ctx, core.Config{Store: store, Providers: &a.registry, Secrets: keys, Logger: log, DeferLoad: true,
		Exporter: a.exporter, Restorer: &restorerun.Restorer{HTTP: wasm.EndpointClient()},
		AgentProbe: agentproxy.Probe{HTTP: wasm.EndpointClient()}, ScheduledDeletion: m == modeServe, GuardMargin: f.guardMargin, OwnersExist: ownersExist(users),
		ExportLocation: exportLocation, ExportBudget: f.exportBudget, StepHook: hook, LeaseTTL: f.leaseTTL, Observer: a.metrics, Events: events})
	if err != nil {
		return err
	}
	if a.hooks != nil {
		a.hooks.Attach(a.svc)
	}
	a.metrics.Domain(a.svc.MetricsSnapshot)
	names := a.registry.Names()
	modules := make([]string, 0, len(names))
	for _, n := range names {
		if !slices.Contains(builtinNames, n) {
			modules = append(modules, n)
		}
	}
	a.metrics.Init(names, modules)
	if err := a.provs.EnsureAccounts(ctx, a.svc); err != nil {
		return err
	}
	a.bridgeCfg = uibridge.Config{
		Service:    a.svc,
		Token:      token,
		TokenActor: tokenActor(m),
		// Whatever address was bound (127.0.0.2, [::1]) is the one the
		// ready URL names, so it must be allowed.
		AllowedHosts:   append(uibridge.ListenerHosts(addr), f.hosts...),
		AllowedOrigins: f.origins,
		BodyTimeout:    f.timeouts.body,
		Version:        version,
		Logger:         log,
		Modules:        a.provs,
		AgentHTTP:      wasm.EndpointClient(),
		AgentConns:     f.agentConns,
		AgentMaxBody:   f.agentMaxBody,
		Metrics:        a.metrics.Handler(),
		Webhooks:       a.hooks,
	}
	if a.bridgeCfg.Login, err = f.login.bridgeLogin(ctx, store, users, a.svc, &a.bridgeCfg, log); err != nil {
		return err
	}
	f.login.warnUnreachable(log, f.listen, f.hosts)
	// The bridge itself is built once the workspaces are loaded; bad
	// settings stop companion now.
	return uibridge.CheckConfig(a.bridgeCfg)
}

// close stops the service and releases the providers and the store, in
// that order; ctx bounds waiting for the service's running actions.
func (a *started) close(ctx context.Context, log *slog.Logger) {
	if a.svc != nil {
		if err := a.svc.Close(ctx); err != nil {
			log.Warn("service shutdown", "err", err)
		}
	}
	if a.provs != nil {
		if err := a.provs.Close(); err != nil {
			log.Warn("closing the providers", "err", err)
		}
	}
	if a.store != nil {
		if err := a.store.Close(); err != nil {
			log.Warn("closing the store", "err", err)
		}
	}
}
