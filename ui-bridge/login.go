package uibridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
)

// Login configures serve mode's sign-in (Config.Login). With it the
// server accepts login sessions (cookie), personal API tokens (bearer) and,
// when Proxy is set, the user a trusted ingress names.
type Login struct {
	Auth *auth.Service
	// Local enables POST /v1/login with a local user's password.
	Local bool
	// Ingress names the trusted ingresses (--trusted-proxy) in every
	// sign-in method: their X-Forwarded-* and Forwarded headers are
	// believed, and removed from every other peer's request before
	// anything reads them; the client address the login limits count is
	// the one they name (auth.Ingress.ClientAddr). The zero value trusts
	// nobody.
	Ingress auth.Ingress
	// Proxy, when set, trusts the ingress (Ingress) to name the user.
	Proxy *Proxy
	// PublicURL is the address people reach companion at (scheme, host
	// and the base path); https makes cookies Secure and __Host-. nil
	// means plain http.
	PublicURL *url.URL
	// BasePath prefixes every route ("/api/companion"); "" for none.
	BasePath string
	// OIDC, when set, serves an OpenID Connect login (login_methods.go).
	OIDC *OIDCRoutes
	// UserRemoved, when set, runs after DELETE /v1/users/{id} removed a
	// user: companion hands what they owned to the first admin. Its
	// error is logged; the removal stands.
	UserRemoved func(ctx context.Context) error
	// AdminArrived, when set, runs before the first request in this
	// process of each admin an ingress names (Proxy), who may have been
	// created by that request: companion gives the first admin what
	// nobody owns. It logs its own failures; the request goes on
	// regardless.
	AdminArrived func(ctx context.Context)

	arrived   sync.Map  // admin ids AdminArrived ran for
	untrusted sync.Once // the warning about forwarding headers from an untrusted peer
}

// Proxy is --auth proxy: the user header is honoured only when the TCP
// peer is a trusted ingress (Login.Ingress), and removed from every other
// request before anything reads it.
type Proxy struct {
	UserHeader string
}

// forwardedHeaders are only believed from a trusted peer.
var forwardedHeaders = []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded"}

// CookieName is the session cookie's name for a public URL and base path:
// "__Host-companion" + the base path's letters when the URL is https (the
// prefix makes browsers refuse the cookie unless it is Secure, host-only
// and Path=/), "companion_session…" otherwise.
func (l *Login) CookieName() string {
	suffix := ""
	for _, c := range strings.Trim(l.BasePath, "/") {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			suffix += string(c)
		} else {
			suffix += "_"
		}
	}
	if suffix != "" {
		suffix = "_" + suffix
	}
	if l.secure() {
		return "__Host-companion" + suffix
	}
	return "companion_session" + suffix
}

func (l *Login) secure() bool { return l.PublicURL != nil && l.PublicURL.Scheme == "https" }

// cookiePath is / for a __Host- cookie (the prefix requires it), else the
// base path, so that other apps on the host do not receive the cookie.
func (l *Login) cookiePath() string {
	if l.secure() || l.BasePath == "" {
		return "/"
	}
	return l.BasePath + "/"
}

func (l *Login) cookie(value string, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{Name: l.CookieName(), Value: value, Path: l.cookiePath(), HttpOnly: true,
		Secure: l.secure(), SameSite: http.SameSiteLaxMode, MaxAge: int(maxAge / time.Second)}
	if maxAge < 0 {
		c.MaxAge = -1
	}
	return c
}

// authenticators are tried in order after the desktop token.
func (l *Login) authenticators() []Authenticator {
	as := []Authenticator{sessionAuth{l}, apiTokenAuth{l}}
	if l.Proxy != nil {
		as = append(as, proxyAuth{l})
	}
	return as
}

// userIdentity is who u is on a request. The audit actor carries the
// stable user id beside the display name: names need not be unique.
func userIdentity(u auth.User, method string) Identity {
	return Identity{Owner: u.ID, Actor: "user:" + u.Name + " (" + u.ID + ")", Admin: u.Admin, UserName: u.Name, Issuer: u.Issuer, Method: method}
}

type sessionAuth struct{ l *Login }

func (a sessionAuth) Authenticate(r *http.Request) (Identity, bool) {
	c, err := r.Cookie(a.l.CookieName())
	if err != nil || c.Value == "" {
		return Identity{}, false
	}
	secret := c.Value
	u, err := a.l.Auth.Session(r.Context(), secret)
	if err != nil {
		return Identity{}, false
	}
	id := userIdentity(u, "session")
	id.cred = &credential{key: sessionKey(secret), check: func(ctx context.Context) error {
		_, err := a.l.Auth.Session(ctx, secret)
		return err
	}}
	return id, true
}

// sessionKey names a session among its user's stream credentials.
func sessionKey(secret string) string { return "session:" + auth.HashSecret(secret) }

type apiTokenAuth struct{ l *Login }

// Authenticate takes the token from Authorization, or on a WebSocket
// handshake from the bearer subprotocol entry, as the launch token is.
func (a apiTokenAuth) Authenticate(r *http.Request) (Identity, bool) {
	tok, ok := bearerToken(r)
	if !ok {
		for _, t := range subprotocolBearers(r) {
			if auth.IsToken(t) {
				tok, ok = t, true
				break
			}
		}
	}
	if !ok || !auth.IsToken(tok) {
		return Identity{}, false
	}
	t, u, err := a.l.Auth.TokenUser(r.Context(), tok)
	if err != nil {
		return Identity{}, false
	}
	id := userIdentity(u, "api_token")
	if t.Scope == auth.ScopeMetrics {
		id.Admin, id.Metrics = false, true
	}
	id.cred = &credential{key: "token:" + t.ID, check: func(ctx context.Context) error {
		_, _, err := a.l.Auth.TokenUser(ctx, tok)
		return err
	}}
	return id, true
}

type proxyAuth struct{ l *Login }

// Authenticate trusts the header because ingress removed it from every
// request whose peer is not trusted.
func (a proxyAuth) Authenticate(r *http.Request) (Identity, bool) {
	name := strings.TrimSpace(r.Header.Get(a.l.Proxy.UserHeader))
	if name == "" {
		return Identity{}, false
	}
	u, err := a.l.Auth.ProxyUser(r.Context(), name)
	if err != nil {
		return Identity{}, false
	}
	if u.Admin && a.l.AdminArrived != nil {
		if _, seen := a.l.arrived.LoadOrStore(u.ID, true); !seen {
			a.l.AdminArrived(context.WithoutCancel(r.Context()))
		}
	}
	id := userIdentity(u, "proxy")
	// The ingress vouches for each request; a stream lasts while its
	// user does (ProxyUser would create them again).
	id.cred = &credential{key: "user:" + u.ID, check: func(ctx context.Context) error {
		_, err := a.l.Auth.User(ctx, u.ID)
		return err
	}}
	return id, true
}

type clientAddrKey struct{}

// clientAddr is the address failed logins are counted against: the TCP
// peer, or the client a trusted ingress names (auth.Ingress.ClientAddr).
func clientAddr(r *http.Request) string {
	if a, ok := r.Context().Value(clientAddrKey{}).(string); ok {
		return a
	}
	return auth.Ingress{}.ClientAddr(r.RemoteAddr, r.Header)
}

// ingress is the outermost handler in serve mode with login: it decides
// what of the request's forwarding headers to believe, then strips the
// base path.
func (l *Login) ingress(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := l.Ingress.ClientAddr(r.RemoteAddr, r.Header)
		if !l.Ingress.PeerTrusted(r.RemoteAddr) {
			if l.Proxy != nil && r.Header.Get(l.Proxy.UserHeader) != "" {
				// Somebody tried to name a user from outside the ingress.
				log.Warn("ignored a user header from an untrusted peer", "peer", client, "header", l.Proxy.UserHeader)
			}
			if l.Proxy != nil {
				r.Header.Del(l.Proxy.UserHeader)
			}
			for _, h := range forwardedHeaders {
				if (h == "X-Forwarded-For" || h == "Forwarded") && r.Header.Get(h) != "" {
					l.untrusted.Do(func() {
						log.Warn("a request named its client in a forwarding header, but its peer is not in --trusted-proxy, so the peer counts as the client; if it is your ingress, add --trusted-proxy with its address, or every client behind it shares one failed-login count",
							"peer", client, "header", h)
					})
				}
				r.Header.Del(h)
			}
		} else if h := r.Header.Get("X-Forwarded-Host"); h != "" && !strings.Contains(h, ",") {
			r.Host = h
		}
		r = r.WithContext(context.WithValue(r.Context(), clientAddrKey{}, client))
		l.stripBase(next).ServeHTTP(w, r)
	})
}

// stripBase serves only paths under BasePath, with the prefix removed,
// and puts it back on Location headers.
func (l *Login) stripBase(next http.Handler) http.Handler {
	if l.BasePath == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := strings.CutPrefix(r.URL.Path, l.BasePath)
		if !ok || (p != "" && p[0] != '/') {
			writeErrorCode(w, http.StatusNotFound, codeRouteNotFound, "no such route: companion serves under "+l.BasePath+"/")
			return
		}
		if p == "" {
			p = "/"
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = p
		r2.URL.RawPath = ""
		next.ServeHTTP(&prefixWriter{ResponseWriter: w, prefix: l.BasePath}, r2)
	})
}

// prefixWriter adds the base path to a relative Location.
type prefixWriter struct {
	http.ResponseWriter
	prefix string
	wrote  bool
}

func (p *prefixWriter) WriteHeader(code int) {
	if !p.wrote {
		p.wrote = true
		if loc := p.Header().Get("Location"); strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") {
			p.Header().Set("Location", p.prefix+loc)
		}
	}
	p.ResponseWriter.WriteHeader(code)
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if !p.wrote {
		p.WriteHeader(http.StatusOK)
	}
	return p.ResponseWriter.Write(b)
}

func (p *prefixWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// Hijack lets the WebSocket upgrader take the connection.
func (p *prefixWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := p.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("uibridge: the connection cannot be hijacked")
	}
	return h.Hijack()
}

func (p *prefixWriter) Flush() {
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Wire forms of the login routes.
type (
	// User is GET /v1/me's and POST /v1/login's user.
	User struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Issuer string `json:"issuer"`
		Admin  bool   `json:"admin"`
	}
	// APIToken is a personal API token's record (never its secret).
	APIToken struct {
		ID    string `json:"id"`
		Label string `json:"label"`
		// Scope is "" (everything the user may do) or "metrics" (GET
		// /metrics only).
		Scope      string     `json:"scope"`
		CreatedAt  time.Time  `json:"created_at"`
		ExpiresAt  *time.Time `json:"expires_at"`
		LastUsedAt *time.Time `json:"last_used_at"`
	}
)

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	wt := wireTime(t)
	return &wt
}

func toWireToken(t auth.Token) APIToken {
	return APIToken{ID: t.ID, Label: t.Label, Scope: t.Scope, CreatedAt: wireTime(t.CreatedAt), ExpiresAt: optTime(t.ExpiresAt), LastUsedAt: optTime(t.LastUsedAt)}
}

func (s *Server) loginRoutes(rt *router) {
	l := s.cfg.Login
	if l == nil {
		return
	}
	if l.Local {
		rt.handle("POST /v1/login", s.login)
	}
	rt.handle("GET /v1/login", s.loginMethods)
	s.oidcRoutes(rt)
	rt.handle("POST /v1/logout", s.logout)
	rt.handle("GET /v1/me", s.me)
	rt.handle("GET /v1/tokens", s.listTokens)
	rt.handle("POST /v1/tokens", s.createToken)
	rt.handle("DELETE /v1/tokens/{id}", s.revokeToken)
	s.userRoutes(rt)
}

// SignIn starts a session for u, signed in by method, and sets its
// cookie on w: the seam for login methods outside this package (an OpenID
// Connect callback calls it with auth.Service.ExternalUser's user).
func (l *Login) SignIn(ctx context.Context, w http.ResponseWriter, u auth.User, method string) error {
	secret, err := l.Auth.StartSession(ctx, u.ID, method)
	if err != nil {
		return err
	}
	http.SetCookie(w, l.cookie(secret, l.Auth.MaxAge()))
	return nil
}

type loginBody struct {
	Name     string `json:"name"`
	Password string `json:"password"`
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var body loginBody
	if !s.decodeBody(w, r, &body, false) {
		return
	}
	if body.Name == "" || body.Password == "" {
		writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid), `name and password are required: {"name": "…", "password": "…"}`)
		return
	}
	l := s.cfg.Login
	secret, u, err := l.Auth.Login(r.Context(), body.Name, body.Password, clientAddr(r))
	if err != nil {
		s.authError(w, r, err)
		return
	}
	http.SetCookie(w, l.cookie(secret, l.Auth.MaxAge()))
	s.log.Info("signed in", "user", u.Name, "addr", clientAddr(r))
	writeJSON(w, http.StatusOK, map[string]any{"user": User{ID: u.ID, Name: u.Name, Issuer: u.Issuer, Admin: u.Admin}})
}

// authError answers a failed sign-in or token check: 401 (not the 502 a
// provider's refusal gets), 429 past the limits.
func (s *Server) authError(w http.ResponseWriter, r *http.Request, err error) {
	var ce *core.Error
	if errors.As(err, &ce) && ce.Kind == core.KindUnauthorized {
		writeErrorCode(w, http.StatusUnauthorized, codeUnauthorized, ce.Message)
		return
	}
	s.writeError(w, r, err)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	l := s.cfg.Login
	if c, err := r.Cookie(l.CookieName()); err == nil && c.Value != "" {
		if err := l.Auth.Logout(r.Context(), c.Value); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.endCredential(owner(r), sessionKey(c.Value), "logged out")
	}
	http.SetCookie(w, l.cookie("", -1))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	id, _ := IdentityFrom(r.Context())
	if id.UserName == "" {
		writeJSON(w, http.StatusOK, map[string]any{"user": nil, "admin": id.Admin, "method": "launch_token"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user": User{ID: id.Owner, Name: id.UserName, Issuer: id.Issuer, Admin: id.Admin},
		"admin": id.Admin, "method": id.Method})
}

// signedIn returns the request's user id, answering 400 for the launch
// token, which is nobody's.
func signedIn(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, _ := IdentityFrom(r.Context())
	if id.UserName == "" {
		writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid), "API tokens belong to users: sign in as one")
		return "", false
	}
	return id.Owner, true
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	uid, ok := signedIn(w, r)
	if !ok {
		return
	}
	list, err := s.cfg.Login.Auth.ListTokens(r.Context(), uid)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]APIToken, 0, len(list))
	for _, t := range list {
		out = append(out, toWireToken(t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

type createTokenBody struct {
	Label            string `json:"label"`
	ExpiresInSeconds int64  `json:"expires_in_seconds"`
	Scope            string `json:"scope"`
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	uid, ok := signedIn(w, r)
	if !ok {
		return
	}
	var body createTokenBody
	if !s.decodeBody(w, r, &body, true) {
		return
	}
	if body.ExpiresInSeconds < 0 || body.ExpiresInSeconds > int64(auth.MaxTokenTTL/time.Second) {
		writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid), fmt.Sprintf("expires_in_seconds must be between 0 (never) and %d", int64(auth.MaxTokenTTL/time.Second)))
		return
	}
	if id, _ := IdentityFrom(r.Context()); body.Scope == auth.ScopeMetrics && !id.Admin {
		writeErrorCode(w, http.StatusForbidden, codeForbidden, "only an admin may make a metrics-scope token: the metrics count every user's workspaces")
		return
	}
	secret, t, err := s.cfg.Login.Auth.CreateScopedToken(r.Context(), uid, body.Label, body.Scope, time.Duration(body.ExpiresInSeconds)*time.Second)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/tokens/"+t.ID)
	writeJSON(w, http.StatusCreated, map[string]any{"token": secret, "info": toWireToken(t)})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	uid, ok := signedIn(w, r)
	if !ok {
		return
	}
	if err := s.cfg.Login.Auth.RevokeToken(r.Context(), uid, r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.endCredential(uid, "token:"+r.PathValue("id"), "token revoked")
	w.WriteHeader(http.StatusNoContent)
}

// adminOnly refuses h to users who are not admins (the launch token is
// one: it is the machine's owner).
func adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id, _ := IdentityFrom(r.Context()); !id.Admin {
			writeErrorCode(w, http.StatusForbidden, codeForbidden, "only an admin may do this (install or remove provider modules, which run for every user, or manage users)")
			return
		}
		h(w, r)
	}
}
