package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/auth/oidclogin"
	"github.com/canvasapp/companion/core"
	uibridge "github.com/canvasapp/companion/ui-bridge"
)

// loginFlags are serve's sign-in flags.
type loginFlags struct {
	auth            string
	trustedProxy    string
	forwardedHeader string
	userHeader      string
	publicURL       string
	basePath        string
	sessionIdle     time.Duration
	sessionMax      time.Duration
	recheck         time.Duration

	local, proxy, oidc bool
	oidcFlags          oidclogin.Flags
	ingress            auth.Ingress
	public             *url.URL
}

func (l *loginFlags) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&l.auth, "auth", "", "sign-in `methods`, comma separated: local (users and passwords, see companion users), oidc (OpenID Connect, see --oidc-*), proxy (a trusted ingress names the user); with one, serve may listen on any address and the per-launch token is off")
	fs.StringVar(&l.trustedProxy, "trusted-proxy", "", "`CIDR`s (comma separated) of the ingress in front of serve (any --auth; required by proxy): only from these peers are --forwarded-header (the client address the sign-in limits count: its right-most hop not itself trusted), X-Forwarded-Host and the user header believed; from others they are dropped and the peer is the client. Behind an ingress without it, every client counts as the ingress")
	fs.StringVar(&l.forwardedHeader, "forwarded-header", auth.HeaderXForwardedFor, "the `header` the --trusted-proxy ingress names the client in: X-Forwarded-For or Forwarded (RFC 7239); only this one is read")
	fs.StringVar(&l.userHeader, "user-header", "X-Forwarded-User", "the `header` a trusted ingress names the user in (--auth proxy)")
	fs.StringVar(&l.publicURL, "public-url", "", "the `URL` people reach companion at, e.g. https://canvas.example.com/api/companion; https makes the session cookie Secure and __Host-; its host is allowed as Host and its origin as Origin")
	fs.StringVar(&l.basePath, "base-path", "", "`prefix` of every route, the WebSocket and the cookie path when an ingress forwards a sub-path, e.g. /api/companion (default: the --public-url path)")
	fs.DurationVar(&l.sessionIdle, "session-idle", 12*time.Hour, "a login session unused this long ends")
	fs.DurationVar(&l.sessionMax, "session-max", 7*24*time.Hour, "a login session ends this long after sign-in, however much it is used")
	fs.DurationVar(&l.recheck, "stream-recheck", uibridge.DefaultCredentialRecheck, "how often the session or API token of each open stream is checked again: a stream ends at most this long after its credential ends in another process (a sign-out on another replica, companion users remove) or expires; in this process it ends at once")
	l.oidcFlags.Register(fs)
}

// enabled reports whether a sign-in method is configured.
func (l *loginFlags) enabled() bool { return l.local || l.proxy || l.oidc }

// check validates the flags and fills in the parsed fields.
func (l *loginFlags) check() error {
	for _, m := range strings.Split(l.auth, ",") {
		switch strings.TrimSpace(m) {
		case "":
		case "local":
			l.local = true
		case "proxy":
			l.proxy = true
		case "oidc":
			l.oidc = true
		default:
			return fmt.Errorf("--auth %q: unknown method %q; want local, oidc, proxy or several (local,oidc)", l.auth, m)
		}
	}
	if l.trustedProxy != "" {
		if !l.enabled() {
			return fmt.Errorf("--trusted-proxy is used with a sign-in method: add --auth local, oidc or proxy (without --auth, serve listens on loopback only and has no login limits)")
		}
		trusted, err := auth.ParseTrusted(l.trustedProxy)
		if err != nil {
			return fmt.Errorf("--trusted-proxy %w", err)
		}
		l.ingress.Trusted = trusted
	}
	switch {
	case strings.EqualFold(l.forwardedHeader, auth.HeaderXForwardedFor):
		l.ingress.Header = auth.HeaderXForwardedFor
	case strings.EqualFold(l.forwardedHeader, auth.HeaderForwarded):
		l.ingress.Header = auth.HeaderForwarded
	default:
		return fmt.Errorf("--forwarded-header %q: want X-Forwarded-For or Forwarded, the header your ingress sets", l.forwardedHeader)
	}
	if l.proxy {
		if l.trustedProxy == "" {
			return fmt.Errorf("--auth proxy needs --trusted-proxy CIDR[,CIDR]: the ingress's addresses, the only peers whose %s header is believed", l.userHeader)
		}
		if strings.TrimSpace(l.userHeader) == "" || strings.ContainsAny(l.userHeader, " :\t") {
			return fmt.Errorf("--user-header %q: want a header name such as X-Forwarded-User", l.userHeader)
		}
	}
	if l.publicURL != "" {
		u, err := url.Parse(l.publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("--public-url %q: want http(s)://host[:port][/path]", l.publicURL)
		}
		u.Path = strings.TrimRight(u.Path, "/")
		l.public = u
		if l.basePath == "" {
			l.basePath = u.Path
		}
	}
	if l.basePath != "" {
		l.basePath = "/" + strings.Trim(l.basePath, "/")
		if l.basePath == "/" {
			l.basePath = ""
		}
		if strings.ContainsAny(l.basePath, "?#%; ") || strings.Contains(l.basePath, "..") || strings.Contains(l.basePath, "//") {
			return fmt.Errorf("--base-path %q: want a plain path such as /api/companion", l.basePath)
		}
		if l.public != nil && l.public.Path != "" && l.public.Path != l.basePath {
			return fmt.Errorf("--base-path %s differs from the path of --public-url %s; give one of them", l.basePath, l.publicURL)
		}
	}
	if (l.basePath != "" || l.public != nil) && !l.enabled() {
		return fmt.Errorf("--base-path and --public-url are for serving behind an ingress with a sign-in method: add --auth local, oidc or proxy")
	}
	if err := l.checkOIDC(); err != nil {
		return err
	}
	if l.sessionIdle <= 0 || l.sessionMax <= 0 || l.sessionIdle > l.sessionMax {
		return fmt.Errorf("--session-idle and --session-max must be positive, idle at most max")
	}
	if l.recheck <= 0 {
		return fmt.Errorf("--stream-recheck must be positive, e.g. 15s")
	}
	return nil
}

// loginStore is what sign-in needs of either engine's store.
type loginStore interface {
	auth.Store
	GetAccount(ctx context.Context, id string) (core.Account, error)
	PutAccount(ctx context.Context, a core.Account) error
}

// users returns the sign-in service of the users in store, or nil without
// --auth.
func (l *loginFlags) users(store auth.Store) *auth.Service {
	if !l.enabled() {
		return nil
	}
	return auth.New(auth.Config{Store: store, IdleTimeout: l.sessionIdle, MaxAge: l.sessionMax})
}

// ownersExist is users.UsersExist, or nil without sign-in (every owner
// label believed: desktop and serve without --auth have no users).
func ownersExist(users *auth.Service) core.OwnersExist {
	if users == nil {
		return nil
	}
	return users.UsersExist
}

// bridgeLogin builds the bridge's login layer on svc (from users), or nil
// without --auth. It also allows the public URL's host and origin.
// workspaces is the service what nobody owns is handed over on (handOver).
func (l *loginFlags) bridgeLogin(ctx context.Context, store loginStore, svc *auth.Service, workspaces *core.Service, cfg *uibridge.Config, log *slog.Logger) (_ *uibridge.Login, err error) {
	if svc == nil {
		return nil, nil
	}
	if l.local {
		has, err := svc.HasUsers(ctx)
		if err != nil {
			return nil, err
		}
		if !has && !l.proxy && !l.oidc {
			return nil, fmt.Errorf("--auth local but there are no users yet: add one first with companion users add --data-dir DIR NAME (the first user is an admin)")
		}
	}
	if err := shareDocker(ctx, store, svc); err != nil {
		return nil, err
	}
	lg := &uibridge.Login{Auth: svc, Local: l.local, Ingress: l.ingress, PublicURL: l.public, BasePath: l.basePath,
		UserRemoved: func(ctx context.Context) error { return handOver(ctx, svc, workspaces, log) }}
	if l.proxy {
		lg.Proxy = &uibridge.Proxy{UserHeader: l.userHeader}
		lg.AdminArrived = func(ctx context.Context) { adminArrived(ctx, store, svc, workspaces, log) }
	}
	if l.oidc {
		if lg.OIDC, err = l.oidcRoutes(ctx, store, svc, workspaces, lg, log); err != nil {
			return nil, err
		}
	}
	cfg.CredentialRecheck = l.recheck
	if l.public != nil {
		cfg.AllowedHosts = append(cfg.AllowedHosts, strings.ToLower(l.public.Host))
		cfg.AllowedOrigins = append(cfg.AllowedOrigins, l.public.Scheme+"://"+l.public.Host)
	}
	return lg, nil
}

// warnUnreachable says so at start when serve listens beyond loopback but
// allows no name: requests by the machine's address or DNS name would all
// get 403 forbidden_host.
func (l *loginFlags) warnUnreachable(log *slog.Logger, listen string, hosts []string) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || !l.enabled() || l.public != nil || len(hosts) > 0 {
		return
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() || host == "localhost" {
		return
	}
	log.Warn("listening beyond loopback, but only the bound address is an allowed Host; set --public-url (or --allow-host) to the name people use, or they will get 403 forbidden_host", "listen", listen)
}

// shareDocker makes the built-in Docker account the first admin's and
// shared, so every user can make boxes on the local Docker Engine and each
// box belongs to whoever made it. With no admin yet (an ingress has named
// nobody so far) it stays as it is until one arrives (adminArrived). The
// rest of what nobody owns goes to the same admin once the workspaces are
// loaded (handOver).
func shareDocker(ctx context.Context, store loginStore, svc *auth.Service) error {
	admin, ok, err := svc.FirstAdmin(ctx)
	if err != nil || !ok {
		return err
	}
	acct, err := store.GetAccount(ctx, localDockerAccount)
	if err != nil {
		return err
	}
	if acct.Shared && acct.Owner != "" {
		return nil // already made; a later admin does not take it over
	}
	acct.Owner, acct.Shared = admin.ID, true
	return store.PutAccount(ctx, acct)
}

// adminArrived runs when an admin signs in through OpenID Connect or is
// first named by an ingress in this process: the first user may arrive
// after start, so they get the built-in Docker account and what nobody
// owns now rather than at the next start. Both are no-ops once done, and
// failures are logged, not returned: the sign-in goes on.
func adminArrived(ctx context.Context, store loginStore, users *auth.Service, workspaces *core.Service, log *slog.Logger) {
	if err := shareDocker(ctx, store, users); err != nil {
		log.Warn("could not share the built-in Docker account", "err", err)
	}
	if err := handOver(ctx, users, workspaces, log); err != nil {
		log.Warn("could not hand over what nobody owns", "err", err)
	}
}

// handOver gives the first admin every account, workspace and export that
// nobody owns: made before sign-in was turned on, or by a user removed
// since (core.Service.HandOverOrphans). It runs after shareDocker, which
// keeps the built-in Docker account shared, and does nothing until an
// admin exists.
func handOver(ctx context.Context, users *auth.Service, svc *core.Service, log *slog.Logger) error {
	admin, ok, err := users.FirstAdmin(ctx)
	if err != nil || !ok {
		return err
	}
	n, err := svc.HandOverOrphans(ctx, admin.ID)
	logHandOver(log, admin, n)
	if err != nil {
		return fmt.Errorf("hand over what nobody owns to %s: %w", admin.Name, err)
	}
	return nil
}

// logHandOver says what a hand-over gave, and what it left for later.
func logHandOver(log *slog.Logger, admin auth.User, n core.HandOver) {
	if n.Accounts+n.Workspaces+n.Exports > 0 {
		log.Info("handed what nobody owned to the first admin", "admin", admin.Name,
			"accounts", n.Accounts, "workspaces", n.Workspaces, "exports", n.Exports)
	}
	if len(n.Busy) > 0 {
		log.Warn("workspaces busy during the hand-over stay unowned until the next start or user removal", "workspaces", n.Busy)
	}
}
