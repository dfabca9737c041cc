package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/metrics"
	"github.com/canvasapp/companion/providers/builtin/docker"
	uibridge "github.com/canvasapp/companion/ui-bridge"
)

type mode string

const (
	modeDesktop mode = "desktop"
	modeServe   mode = "serve"
)

// serverFlags are the flags of desktop and serve.
type serverFlags struct {
	dataDir           string
	exportDir         string
	exportStore       string
	exportBudget      time.Duration
	listen            string
	origins           stringList
	hosts             stringList
	dockerImage       string
	dockerScope       string
	reconcileInterval time.Duration
	retentionInterval time.Duration
	leaseTTL          time.Duration // serve only; matters on PostgreSQL
	guardInterval     time.Duration // serve only
	guardMargin       time.Duration // serve only
	agentConns        int
	agentMaxBody      int64
	connectedRead     time.Duration
	logLevel          string
	logFormat         string
	exitOnStdinClose  bool
	timeouts          httpTimeouts
	secrets           secretFlags
	database          databaseFlags // serve only
	login             loginFlags
	metricsListen     string
	metricsPublic     bool
	webhooks          webhookFlags // serve only
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func defaultDataDir() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ".companion"
	}
	return filepath.Join(dir, "companion")
}

func parseServerFlags(m mode, args []string, stderr io.Writer) (*serverFlags, error) {
	f := &serverFlags{}
	fs := flag.NewFlagSet("companion "+string(m), flag.ContinueOnError)
	fs.SetOutput(stderr)
	defaultListen := "127.0.0.1:0"
	if m == modeServe {
		defaultListen = "127.0.0.1:8080"
	}
	fs.StringVar(&f.dataDir, "data-dir", defaultDataDir(), "`directory` for the database, installed modules and caches")
	fs.StringVar(&f.exportDir, "export-dir", "", "`directory` for verified exports (default <data-dir>/exports); it must exist")
	fs.StringVar(&f.exportStore, "export-store", "", "`URL` where verified exports are kept: file:///dir (as --export-dir), s3://bucket/prefix?region=R&endpoint=URL or gs://bucket/prefix;\nobject stores use the platform's credentials (AWS environment, shared config or role; Google application default credentials)")
	fs.DurationVar(&f.exportBudget, "export-budget", 30*time.Minute, "how long an export may take, retries and their waits included: a person's export then fails, a delete is blocked (or, for a best_effort account, goes ahead without it)")
	fs.StringVar(&f.listen, "listen", defaultListen, "`address` to listen on (port 0 picks a free port)")
	fs.Var(&f.origins, "allow-origin", "extra browser `origin` allowed to call the API, e.g. the Electron app's (repeatable)")
	fs.StringVar(&f.dockerImage, "docker-image", docker.DefaultImage, "`image` for new Docker workspaces, pulled when the Docker Engine lacks it; it must serve the agent-server on port 8000")
	fs.StringVar(&f.dockerScope, "docker-scope", "default", "only manage Docker containers labelled with this `name`, so several companions can share one Docker Engine")
	fs.DurationVar(&f.reconcileInterval, "reconcile-interval", 15*time.Second, "how often each account's boxes are listed at the provider")
	fs.DurationVar(&f.retentionInterval, "retention-interval", time.Minute, "how often serve mode's retention tick looks for due workspaces (desktop mode never deletes on a timer)")
	fs.IntVar(&f.agentConns, "agent-conns", 64, "how many connections to agent-servers one user may have open through companion (requests and WebSockets)")
	fs.Int64Var(&f.agentMaxBody, "agent-max-body", 1<<30, "the largest request body, in `bytes`, companion forwards to an agent-server")
	fs.DurationVar(&f.connectedRead, "connected-read-interval", core.DefaultConnectedReadEvery, "how often the agent-server of a box someone is connected to is asked for its idle time, where the provider does not report activity (no box nobody is connected to is read)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log `format` on stderr: text or json")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "`address` of a second listener that serves only GET /metrics, with no credential (for a Prometheus server on the same host or internal network): a loopback or private address, or any with --metrics-listen-public; the main listener serves /metrics too, to admins and API tokens with the metrics scope")
	fs.BoolVar(&f.metricsPublic, "metrics-listen-public", false, "allow --metrics-listen on an address that is neither loopback nor private (0.0.0.0, say, in a container whose network is private); anyone who reaches it reads the metrics")
	f.timeouts.addFlags(fs)
	f.secrets.addFlags(fs)
	f.database.addFlags(fs)
	if m == modeServe {
		fs.DurationVar(&f.leaseTTL, "lease-ttl", 30*time.Second, "on PostgreSQL, how long a replica's leases and journal claims outlive it: another replica takes over its work this long after it stopped (renewed every third of it while alive)")
		fs.DurationVar(&f.guardInterval, "guard-interval", core.DefaultGuardInterval, "how often workspaces a provider paused on its own, with a deletion clock running and no export holding them, are looked at")
		fs.DurationVar(&f.guardMargin, "guard-margin", core.DefaultGuardMargin, "how long before a provider's deletion clock runs out such a workspace is exported (woken, exported, paused again); one shorter than this, or whose time is not published, at once")
		fs.Var(&f.hosts, "allow-host", "extra `host[:port]` the server answers to, e.g. the name your ingress forwards (repeatable)")
		f.login.addFlags(fs)
		f.webhooks.addFlags(fs)
	}
	if m == modeDesktop {
		fs.BoolVar(&f.exitOnStdinClose, "exit-on-stdin-close", true, "exit when stdin closes (the parent app died)")
	}
	fs.Usage = func() {
		switch m {
		case modeDesktop:
			fmt.Fprint(stderr, `Usage: companion desktop [flags]

Runs companion for Canvas desktop. It listens on loopback only, and once it
listens and has opened its data dir it prints exactly one JSON line on
stdout (requests wait until its workspaces are loaded); whatever the flags
or the data dir get wrong stops it before that line:

  {"event":"ready","url":"http://127.0.0.1:PORT","token":"...","version":"...",
   "page_url":"http://127.0.0.1:PORT/#token=..."}

page_url opens the web page signed in (the token rides after the #, which
browsers never send). Every /v1/ request must carry the token
(Authorization: Bearer TOKEN, or the WebSocket subprotocol
companion.bearer.TOKEN from browsers). Logs go to stderr. It exits on
SIGINT or SIGTERM, and when its stdin closes.

Flags:
`)
		case modeServe:
			fmt.Fprint(stderr, `Usage: companion serve [flags]

Runs the always-on companion server for Canvas web. Until a login method is
configured (--auth) it only listens on loopback addresses and uses a
per-launch token like desktop mode; it prints the same ready line on stdout.

With --auth local (users from "companion users add"), --auth oidc (OpenID
Connect: --oidc-issuer, --oidc-client-id, --oidc-client-secret-file and
--public-url) or --auth proxy (a trusted ingress names the user), every /v1/
request needs a signed-in user: a session cookie from POST /v1/login or from
the OpenID Connect callback, the ingress's user header, or a personal API
token ("companion tokens create"). GET /v1/login lists the methods on. The per-launch token is then
off (the ready line's token is empty), and any --listen address is allowed.

Provider tokens are kept in the OS keyring when one answers; a server without
one needs a secret key for the sealed store (--secrets sealed
--secret-key-file FILE; see "companion secrets --help"), or it refuses to
start. Tokens are never kept in plain text.

Flags:
`)
		}
		printFlags(stderr, fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	if err := f.timeouts.check(); err != nil {
		return nil, err
	}
	if err := f.secrets.check(); err != nil {
		return nil, err
	}
	if err := f.database.checkMode(m); err != nil {
		return nil, err
	}
	if f.retentionInterval <= 0 {
		return nil, fmt.Errorf("--retention-interval %s: want a positive duration, e.g. 1m", f.retentionInterval)
	}
	if m == modeServe {
		if err := f.webhooks.check(); err != nil {
			return nil, err
		}
	}
	if m == modeServe && f.leaseTTL < time.Second {
		return nil, fmt.Errorf("--lease-ttl %s: want at least 1s, e.g. 30s", f.leaseTTL)
	}
	if err := f.checkExportStore(); err != nil {
		return nil, err
	}
	if f.exportBudget <= 0 {
		return nil, fmt.Errorf("--export-budget must be positive, not %s", f.exportBudget)
	}
	if f.connectedRead <= 0 {
		return nil, fmt.Errorf("--connected-read-interval %s: want a positive duration, e.g. 1m", f.connectedRead)
	}
	if f.agentConns < 1 || f.agentMaxBody < 1 {
		return nil, fmt.Errorf("--agent-conns and --agent-max-body must be at least 1, not %d and %d", f.agentConns, f.agentMaxBody)
	}
	if m == modeServe {
		if f.guardInterval <= 0 || f.guardMargin <= 0 {
			return nil, fmt.Errorf("--guard-interval %s and --guard-margin %s: want positive durations, e.g. 1m and 1h", f.guardInterval, f.guardMargin)
		}
		if err := f.login.check(); err != nil {
			return nil, err
		}
	}
	origins, err := normalizeOrigins(f.origins)
	if err != nil {
		return nil, err
	}
	f.origins = origins
	return f, nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// checkListen refuses addresses the mode may not use; login says whether
// serve has a sign-in method.
func checkListen(m mode, addr string, login bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %v (want HOST:PORT, e.g. 127.0.0.1:0)", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--listen %q: the port %q is not a number from 0 to 65535 (0 picks a free port)", addr, port)
	}
	if host == "localhost" || (m == modeServe && login) {
		return nil
	}
	ip := net.ParseIP(host)
	if ip != nil && ip.IsLoopback() {
		return nil
	}
	if m == modeDesktop {
		return fmt.Errorf("--listen %q: desktop mode listens on loopback only (127.0.0.1 or ::1)", addr)
	}
	return fmt.Errorf("--listen %q: refusing a non-loopback address: no login method is configured, and without one anyone who reaches the server could spend the provider accounts; listen on 127.0.0.1 behind your ingress (with --allow-host for the name it forwards) until login is set up", addr)
}

// checkMetricsListen refuses a --metrics-listen address that is neither
// loopback nor private (nor a name), unless public is set: the metrics are
// served there without a credential. Desktop mode listens on loopback
// only.
func checkMetricsListen(m mode, addr string, public bool) error {
	if addr == "" {
		return nil
	}
	if m == modeDesktop {
		if checkListen(modeDesktop, addr, false) != nil {
			return fmt.Errorf("--metrics-listen %q: desktop mode listens on loopback only (127.0.0.1 or ::1)", addr)
		}
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--metrics-listen %q: %v (want HOST:PORT, e.g. 127.0.0.1:9090)", addr, err)
	}
	if public || host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip != nil && (ip.IsLoopback() || ip.IsPrivate()) {
		return nil
	}
	return fmt.Errorf("--metrics-listen %q: refusing an address that is neither loopback nor private: metrics are served there without a credential; use a loopback or internal address, or add --metrics-listen-public if the network is private anyway", addr)
}

// readyLine is what desktop (once listening) and serve (once open) print
// on stdout.
type readyLine struct {
	Event   string `json:"event"`
	URL     string `json:"url"`
	Token   string `json:"token"`
	Version string `json:"version"`
	// PageURL opens the embedded page signed in: the token rides in the
	// fragment, which browsers never send to a server.
	PageURL string `json:"page_url"`
}

func runServer(m mode, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, err := parseServerFlags(m, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "companion %s: %v\n", m, err)
		return 2
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "companion %s: %v\n", m, err)
		return 2
	}
	if err := checkListen(m, f.listen, f.login.enabled()); err != nil {
		fmt.Fprintf(stderr, "companion %s: %v\n", m, err)
		return 2
	}
	if err := checkMetricsListen(m, f.metricsListen, f.metricsPublic); err != nil {
		fmt.Fprintf(stderr, "companion %s: %v\n", m, err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if m == modeDesktop && f.exitOnStdinClose {
		ctx = exitOnEOF(ctx, stdin, log)
	}
	if err := serve(ctx, m, f, log, stdout); err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while starting", "err", err)
			return 0
		}
		log.Error("companion stopped with an error", "err", err)
		return 1
	}
	return 0
}

// exitOnEOF returns a context that ends when r reaches end of file: the
// parent app that started desktop mode died, and companion must not be left
// behind as an orphan.
func exitOnEOF(ctx context.Context, r io.Reader, log *slog.Logger) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		_, _ = io.Copy(io.Discard, bufio.NewReader(r))
		log.Info("stdin closed; shutting down")
	}()
	return ctx
}

func newToken() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// dataDirLockWait is how long a start waits for a previous companion on
// the same data dir to finish shutting down (its shutdown is bounded by
// the 10 s below).
const dataDirLockWait = 15 * time.Second

// serve runs companion until ctx ends.
//
// It listens, then opens the store, the secret store and the providers
// (started.open: milliseconds, nothing in proportion to the store), and
// only then prints its ready line: whatever a flag or the data dir gets
// wrong (a sealed data dir without its key, a data dir made with another
// --docker-scope, a store that does not open) stops companion before the
// line, so an app that watches for exit until the line learns of it. The
// workspaces are loaded after the line, behind the start gate that holds
// requests until they are. See docs/decisions.md, "Every refusal comes
// before the ready line".
func serve(ctx context.Context, m mode, f *serverFlags, log *slog.Logger, stdout io.Writer) error {
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	unlock, err := lockDataDir(ctx, f.dataDir, dataDirLockWait, func(holder string) {
		log.Warn("another companion is using the data dir; waiting for it to stop", "pid", holder, "data_dir", f.dataDir, "wait", dataDirLockWait)
	})
	if err != nil {
		return err
	}
	defer unlock()
	if f.database.sqlite() {
		if err := db.CheckFile(sqlitePath(f.dataDir)); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.listen, err)
	}
	var metricsLn net.Listener
	if f.metricsListen != "" {
		if metricsLn, err = net.Listen("tcp", f.metricsListen); err != nil {
			ln.Close()
			return fmt.Errorf("--metrics-listen %s: %w", f.metricsListen, err)
		}
		defer metricsLn.Close()
	}
	token := newToken()
	if f.login.enabled() {
		token = "" // users sign in; the launch token is nobody (docs/decisions.md)
	}
	gate := newStartGate(f.login.basePath)
	srv := newHTTPServer(gate, f.timeouts, log)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var app started
	var bridge *uibridge.Server
	defer func() {
		gate.open(nil) // no-op once opened; frees requests held by a failed start
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if bridge != nil {
			bridge.Close() // WebSocket connections are hijacked: Shutdown does not see them
		}
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("http shutdown", "err", err)
		}
		app.close(sctx, log)
	}()

	url := "http://" + ln.Addr().String() + f.login.basePath
	announce := func() {
		pageURL := url + "/"
		if token != "" {
			pageURL += "#token=" + token
		}
		if err := json.NewEncoder(stdout).Encode(readyLine{Event: "ready", URL: url, Token: token, Version: version,
			PageURL: pageURL}); err != nil {
			log.Warn("could not write the ready line", "err", err)
		}
		log.Info("companion ready", "mode", m, "url", url, "data_dir", f.dataDir, "version", version)
	}
	if err := app.open(ctx, m, f, log, ln.Addr(), token); err != nil {
		return err
	}
	announce()
	store, svc, provs, exporter := app.store, app.svc, app.provs, app.exporter
	// SQLite's read pool opens now rather than while the store opens,
	// where it would share the CPU with what serving waits for.
	if w, ok := store.(interface{ WarmReads() }); ok {
		w.WarmReads()
	}

	// Nothing before the ready line may take time in proportion to the
	// store: the workspaces are loaded, the journal recovered and the API
	// built after it, while the start gate holds early requests.
	loadStart := time.Now()
	if err := svc.Load(ctx); err != nil {
		return err
	}
	if err := createExportRoot(f, exporter.Writer.Root); err != nil {
		return err
	}
	if err := recoverExports(ctx, exporter, svc, log); err != nil {
		return err
	}
	if err := svc.Recover(ctx); err != nil {
		return err
	}
	if lg := app.bridgeCfg.Login; lg != nil {
		// What nobody owns waits for the next start (or user removal)
		// rather than keep everyone else out.
		if err := handOver(ctx, lg.Auth, svc, log); err != nil && ctx.Err() == nil {
			log.Warn("the hand-over of what nobody owns did not finish; the next start tries again", "err", err)
		}
	}
	bridge, err = uibridge.New(app.bridgeCfg)
	if err != nil {
		return err
	}
	app.metrics.Stream(func() metrics.StreamStats {
		st := bridge.StreamStats()
		return metrics.StreamStats{Clients: st.Clients, Opened: st.Opened, Messages: st.Messages, Dropped: st.Dropped}
	})
	gate.open(app.metrics.Middleware(bridge.Handler()))
	gate.setReady(&readyChecker{store: store, secrets: app.keys, log: log})
	if metricsLn != nil {
		msrv := newMetricsServer(app.metrics.Handler(), f.timeouts, log)
		go func() { _ = msrv.Serve(metricsLn) }()
		defer msrv.Close()
		log.Info("metrics listening", "url", "http://"+metricsLn.Addr().String()+uibridge.MetricsPath)
	}
	log.Info("workspaces loaded", "workspaces", svc.Feed().Len(), "load_ms", time.Since(loadStart).Milliseconds())
	provs.Start()

	rctx, stopReconciler := context.WithCancel(ctx)
	reconciled := make(chan struct{})
	go func() {
		defer close(reconciled)
		svc.RunReconciler(rctx, core.ReconcileConfig{Interval: f.reconcileInterval})
	}()

	retained := make(chan struct{})
	go func() {
		defer close(retained)
		svc.RunRetention(rctx, core.RetentionConfig{Interval: f.retentionInterval})
	}()

	// Boxes people are connected to (through the agent proxy) are read
	// for their activity; no other box is.
	connected := make(chan struct{})
	go func() {
		defer close(connected)
		svc.RunConnectedReads(rctx, f.connectedRead)
	}()

	// Serve exports what a provider's own deletion clock would take; the
	// desktop only marks it at risk.
	guarded := make(chan struct{})
	go func() {
		defer close(guarded)
		if m == modeServe {
			svc.RunGuard(rctx, f.guardInterval)
		}
	}()

	// On PostgreSQL, modules installed or removed through another
	// replica are followed at the reconciler's pace.
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		provs.RunSync(rctx, f.reconcileInterval)
	}()

	// Serve sends its webhooks from the outbox; the desktop has none.
	hooked := make(chan struct{})
	go func() {
		defer close(hooked)
		if app.hooks != nil {
			app.hooks.Run(rctx)
		}
	}()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	log.Info("shutting down")
	stopReconciler()
	<-reconciled
	<-retained
	<-connected
	<-guarded
	<-followed
	<-hooked
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}
