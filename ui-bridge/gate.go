package uibridge

import (
	"github.com/canvasapp/companion/core"

	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Subprotocols of the WebSocket stream.
const (
	// Subprotocol is the stream protocol a client must offer; the server
	// selects exactly this one.
	Subprotocol = "companion.v1"
	// BearerSubprotocolPrefix carries the token from browsers, which
	// cannot set headers on a WebSocket: the client offers
	// "companion.bearer.<token>" next to Subprotocol. The server never
	// selects (echoes) it.
	BearerSubprotocolPrefix = "companion.bearer."
)

// Identity is who a request acts for.
type Identity struct {
	// Owner is the user whose workspaces and accounts the request may see
	// and change: "" on the desktop, the logged-in user in serve mode.
	Owner string
	// Actor names who acts in the audit trail; "" means the gate's
	// Config.TokenActor.
	Actor string
	// Admin may install and remove provider modules: the launch token's
	// holder, and serve-mode users with the admin role.
	Admin bool
	// Metrics is an API token with the metrics scope: it may read GET
	// /metrics and nothing else (an Admin may read it too).
	Metrics bool
	// UserName, Issuer and Method describe a signed-in user (serve mode
	// with Config.Login); UserName is "" for the launch token.
	UserName, Issuer, Method string

	// cred is the credential a signed-in request proved itself with, for
	// the streams it opens (credential.go); nil for the launch token,
	// which lasts as long as the process.
	cred *credential
}

type identityKey struct{}

// IdentityFrom returns the identity the gate established for a request
// to /v1/; ok is false outside /v1/.
func IdentityFrom(ctx context.Context) (id Identity, ok bool) {
	id, ok = ctx.Value(identityKey{}).(Identity)
	return id, ok
}

func withIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// Authenticator decides who a request to /v1/ is from. The desktop uses
// TokenAuthenticator; serve mode adds one that reads a login session
// cookie. The gate has already checked Host, Origin and cross-site
// headers when it calls Authenticate.
type Authenticator interface {
	// Authenticate returns the identity r proves, or ok false when r
	// carries no valid credential of this kind.
	Authenticate(r *http.Request) (id Identity, ok bool)
}

// TokenAuthenticator accepts the per-launch token as
// "Authorization: Bearer <token>", and on a WebSocket handshake also as a
// subprotocol entry BearerSubprotocolPrefix+token. It compares in
// constant time and yields the desktop identity (Owner "").
func TokenAuthenticator(token string) Authenticator {
	return &tokenAuth{sum: sha256.Sum256([]byte(token))}
}

type tokenAuth struct{ sum [32]byte }

func (t *tokenAuth) Authenticate(r *http.Request) (Identity, bool) {
	if tok, ok := bearerToken(r); ok && t.match(tok) {
		return Identity{Admin: true}, true
	}
	for _, tok := range subprotocolBearers(r) {
		if t.match(tok) {
			return Identity{Admin: true}, true
		}
	}
	return Identity{}, false
}

// subprotocolBearers are the tokens a WebSocket handshake offers as
// subprotocol entries BearerSubprotocolPrefix+token (browsers cannot set
// headers on a WebSocket); none for any other request.
func subprotocolBearers(r *http.Request) []string {
	if !isWebSocketUpgrade(r) {
		return nil
	}
	var out []string
	for _, p := range offeredSubprotocols(r) {
		if tok, ok := strings.CutPrefix(p, BearerSubprotocolPrefix); ok && tok != "" {
			out = append(out, tok)
		}
	}
	return out
}

// match compares digests so that neither the content nor the length of
// the token leaks through timing.
func (t *tokenAuth) match(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1
}

func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

func isWebSocketUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func offeredSubprotocols(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// LoopbackHosts are the Host header values under which a server bound to
// a loopback address on port is reached: 127.0.0.1:port, localhost:port
// and [::1]:port.
func LoopbackHosts(port int) []string {
	p := strconv.Itoa(port)
	return []string{net.JoinHostPort("127.0.0.1", p), net.JoinHostPort("localhost", p), net.JoinHostPort("::1", p)}
}

// ListenerHosts are the Host header values under which a server listening
// on addr is reached: the address actually bound (127.0.0.2:PORT or
// [::1]:PORT as well as 127.0.0.1:PORT), and for a loopback address also
// LoopbackHosts(port), localhost:PORT among them.
func ListenerHosts(addr net.Addr) []string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	hosts := []string{net.JoinHostPort(ta.IP.String(), strconv.Itoa(ta.Port))}
	if ta.IP.IsLoopback() {
		for _, h := range LoopbackHosts(ta.Port) {
			if h != hosts[0] {
				hosts = append(hosts, h)
			}
		}
	}
	return hosts
}

// gate is the route gate, the first handler every request meets.
type gate struct {
	hosts       map[string]bool
	origins     map[string]bool
	auth        []Authenticator
	cop         *http.CrossOriginProtection
	bodyTimeout time.Duration
	tokenActor  string
	public      map[string]bool // /v1/ paths open without a credential
	next        http.Handler
}

func newGate(cfg Config, next http.Handler) (*gate, error) {
	g := &gate{hosts: map[string]bool{}, origins: map[string]bool{}, cop: http.NewCrossOriginProtection(), bodyTimeout: cfg.BodyTimeout, next: next}
	if g.bodyTimeout <= 0 {
		g.bodyTimeout = DefaultBodyTimeout
	}
	g.tokenActor = cfg.TokenActor
	if g.tokenActor == "" {
		g.tokenActor = core.ActorDesktopToken
	}
	if len(cfg.AllowedHosts) == 0 {
		return nil, fmt.Errorf("uibridge: Config.AllowedHosts is empty; pass LoopbackHosts(port) of the bound listener")
	}
	for _, h := range cfg.AllowedHosts {
		h = strings.ToLower(strings.TrimSpace(h))
		// Exactly as browsers send Host: host:port, or a bare host for
		// the default port (a name an ingress forwards, say).
		host, _, err := net.SplitHostPort(h)
		if err != nil {
			host = h
			if strings.Contains(h, ":") {
				host = "" // neither host:port nor a bare name
			}
		}
		if host == "" || strings.ContainsAny(host, "/@?# ") {
			return nil, fmt.Errorf("uibridge: allowed host %q must be host:port, or a host name for the default port", h)
		}
		g.hosts[h] = true
		// The companion's own pages are served from these hosts.
		g.origins["http://"+h] = true
	}
	for _, o := range cfg.AllowedOrigins {
		n, err := NormalizeOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("uibridge: allowed origin %q: %w", o, err)
		}
		g.origins[n] = true
	}
	for o := range g.origins {
		if err := g.cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("uibridge: allowed origin %q: %w", o, err)
		}
	}
	if cfg.Token != "" {
		g.auth = append(g.auth, TokenAuthenticator(cfg.Token))
	}
	g.auth = append(g.auth, cfg.Authenticators...)
	if cfg.Login != nil {
		g.auth = append(g.auth, cfg.Login.authenticators()...)
		g.public = map[string]bool{"/v1/login": true, "/v1/logout": true}
	}
	if len(g.auth) == 0 {
		return nil, fmt.Errorf("uibridge: no way to authenticate: set Config.Token or Config.Authenticators")
	}
	return g, nil
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	armBodyDeadline(w, r, g.bodyTimeout)
	// Every refusal below is answered before the body is read.
	// The Host allowlist is what stops DNS rebinding: a rebound page is
	// same-origin with itself, so Origin checks pass, but its requests
	// name the attacker's host.
	if !g.hosts[strings.ToLower(r.Host)] {
		refuse(w, r, http.StatusForbidden, codeForbiddenHost, "the Host header does not name this server's address")
		return
	}
	origin, hasOrigin := r.Header["Origin"]
	if hasOrigin && (len(origin) != 1 || !g.origins[origin[0]]) {
		refuse(w, r, http.StatusForbidden, codeForbiddenOrigin, "requests from this origin are not allowed; add it to the allowed origins if it is your app")
		return
	}
	if hasOrigin {
		// CORS, so that an allowed app on another origin (the desktop
		// app's) can read answers. Desktop auth uses no cookies, so
		// credentials are not allowed.
		h := w.Header()
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Allow-Origin", origin[0])
		h.Set("Access-Control-Expose-Headers", "Location, Retry-After, WWW-Authenticate")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			h.Set("Access-Control-Max-Age", "600")
			if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
				h.Set("Access-Control-Allow-Private-Network", "true")
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if err := g.cop.Check(r); err != nil {
		refuse(w, r, http.StatusForbidden, codeCrossSite, "cross-site requests that change state are not allowed")
		return
	}
	// CrossOriginProtection lets GET through, and a WebSocket handshake is
	// a GET: check the handshake's fetch metadata here. Browsers always
	// send Origin on a handshake, so this is defence in depth.
	if isWebSocketUpgrade(r) && !hasOrigin {
		if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
			refuse(w, r, http.StatusForbidden, codeCrossSite, "cross-site WebSocket handshakes are not allowed")
			return
		}
	}
	if r.URL.Path == MetricsPath {
		g.metrics(w, r)
		return
	}
	if r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/") {
		id, ok := g.authenticate(r)
		switch {
		case ok && id.Metrics:
			refuse(w, r, http.StatusForbidden, codeForbidden, "this API token has the metrics scope: it may read GET "+MetricsPath+" only")
			return
		case ok:
			if id.Actor == "" {
				id.Actor = g.tokenActor
			}
			r = r.WithContext(core.WithActor(withIdentity(r.Context(), id), id.Actor))
		case r.URL.Path == OpenAPIPath:
			// The contract is public: see OpenAPIPath.
		case g.public[r.URL.Path] || (g.public != nil && strings.HasPrefix(r.URL.Path, "/v1/login/")):
			// Sign-in (any method's routes under /v1/login/) and sign-out
			// need no credential (and get no identity).
		case g.public != nil:
			w.Header().Set("WWW-Authenticate", `Bearer realm="companion"`)
			refuse(w, r, http.StatusUnauthorized, codeUnauthorized, "sign in first (POST /v1/login, or through your ingress), or send Authorization: Bearer <API token>")
			return
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="companion"`)
			refuse(w, r, http.StatusUnauthorized, codeUnauthorized, "a valid token is required: send Authorization: Bearer <token>, or on a WebSocket the subprotocol companion.bearer.<token>")
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// MetricsPath is where the metrics are served, behind the gate: to an
// admin, or to an API token with the metrics scope.
const MetricsPath = "/metrics"

// metrics lets an admin or a metrics-scope token through to GET /metrics.
func (g *gate) metrics(w http.ResponseWriter, r *http.Request) {
	id, ok := g.authenticate(r)
	switch {
	case !ok:
		w.Header().Set("WWW-Authenticate", `Bearer realm="companion"`)
		refuse(w, r, http.StatusUnauthorized, codeUnauthorized, "metrics need an admin's session or an API token with the metrics scope (companion tokens create --scope metrics): send Authorization: Bearer <API token>")
		return
	case !id.Admin && !id.Metrics:
		refuse(w, r, http.StatusForbidden, codeForbidden, "metrics are for admins and API tokens with the metrics scope")
		return
	}
	g.next.ServeHTTP(w, r.WithContext(withIdentity(r.Context(), id)))
}

// refuse answers a request the gate turns away, without reading its body.
func refuse(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	dropBody(w, r)
	writeErrorCode(w, status, code, message)
}

func (g *gate) authenticate(r *http.Request) (Identity, bool) {
	for _, a := range g.auth {
		if id, ok := a.Authenticate(r); ok {
			return id, true
		}
	}
	return Identity{}, false
}
