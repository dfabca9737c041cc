package oidclogin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Login is a configured OpenID Connect login: the discovered provider, the
// OAuth2 client and the two handlers. It is safe for concurrent use.
type Login struct {
	cfg      *checked
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
	sealer   *sealer
}

// New checks cfg and discovers the provider, retrying with backoff until
// cfg.DiscoveryTimeout (a provider that starts with companion is common).
// It fails at once on a configuration error or when the provider names a
// different issuer, since retrying cannot fix either.
func New(ctx context.Context, cfg Config) (*Login, error) {
	c, err := cfg.check()
	if err != nil {
		return nil, err
	}
	s, err := newSealer(c.CookieKey)
	if err != nil {
		return nil, fmt.Errorf("oidc: cookie key: %w", err)
	}
	p, err := discover(ctx, c)
	if err != nil {
		return nil, err
	}
	var meta struct {
		Challenges []string `json:"code_challenge_methods_supported"`
	}
	if err := p.Claims(&meta); err == nil && len(meta.Challenges) > 0 && !slices.Contains(meta.Challenges, "S256") {
		c.Logger.Warn("oidc: the provider does not list PKCE S256 among its code challenge methods; logins may fail", "issuer", c.Issuer, "methods", meta.Challenges)
	}
	scopes := append([]string{oidc.ScopeOpenID, "email", "profile"}, c.ExtraScopes...)
	l := &Login{
		cfg:      c,
		provider: p,
		verifier: p.Verifier(&oidc.Config{ClientID: c.ClientID, Now: c.Clock.Now}),
		oauth: oauth2.Config{
			ClientID: c.ClientID, ClientSecret: c.ClientSecret,
			Endpoint: p.Endpoint(), RedirectURL: c.redirectURL, Scopes: scopes,
		},
		sealer: s,
	}
	c.Logger.Info("oidc: provider discovered", "issuer", c.Issuer, "redirect_url", c.redirectURL)
	return l, nil
}

func discover(ctx context.Context, c *checked) (*oidc.Provider, error) {
	ctx = oidc.ClientContext(ctx, c.HTTPClient)
	deadline := c.Clock.Now().Add(c.DiscoveryTimeout)
	wait := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		p, err := oidc.NewProvider(ctx, c.Issuer)
		if err == nil {
			return p, nil
		}
		var mismatch *oidc.IssuerMismatchError
		if errors.As(err, &mismatch) {
			return nil, fmt.Errorf("oidc: the provider at %s calls itself %q: set --oidc-issuer to exactly that (a trailing slash matters)", c.Issuer, mismatch.Discovered)
		}
		left := deadline.Sub(c.Clock.Now())
		if left <= 0 || ctx.Err() != nil {
			return nil, fmt.Errorf("oidc: discovering the provider at %s failed after %d attempts in %v: %w (check --oidc-issuer and that the provider is reachable from this host)", c.Issuer, attempt, c.DiscoveryTimeout, err)
		}
		c.Logger.Warn("oidc: provider not reachable yet; retrying", "issuer", c.Issuer, "attempt", attempt, "err", err)
		t := c.Clock.NewTimer(min(wait, left))
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// RedirectURL is the callback URL to register at the provider.
func (l *Login) RedirectURL() string { return l.cfg.redirectURL }

// Register adds the two routes, under the base path, to mux.
func (l *Login) Register(mux *http.ServeMux) {
	mux.Handle("GET "+l.cfg.BasePath+StartPath, l.StartHandler())
	mux.Handle("GET "+l.cfg.BasePath+CallbackPath, l.CallbackHandler())
}

// StartHandler answers GET …/v1/login/oidc[?return_to=/path] with a redirect
// to the provider. return_to, a path on this site, is where the callback
// sends the browser after a successful login (default: BasePath + "/").
func (l *Login) StartHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		returnTo, ok := safeReturnTo(r.URL.Query().Get("return_to"))
		if !ok {
			l.writeRefusal(w, r, refuse(http.StatusBadRequest, CodeInvalid, "return_to must be a path on this site, starting with a single /"))
			return
		}
		if returnTo == "" {
			returnTo = l.cfg.BasePath + "/"
		}
		if old := l.loginCookies(r); len(old) >= maxPending {
			for _, name := range old {
				l.clearCookie(w, name)
			}
		}
		p := pending{
			State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(),
			ReturnTo: returnTo, Expires: l.cfg.Clock.Now().Add(l.cfg.LoginTTL).Unix(),
		}
		if err := l.setLoginCookie(w, p); err != nil {
			l.internal(w, r, "sealing the login cookie", err)
			return
		}
		to := l.oauth.AuthCodeURL(p.State, oidc.Nonce(p.Nonce), oauth2.S256ChallengeOption(p.Verifier))
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, to, http.StatusFound)
	})
}

// CallbackHandler answers GET …/v1/login/oidc/callback: it checks state,
// redeems the code with the login's PKCE verifier, verifies the ID token and
// its nonce, applies the domain and group rules, calls OnLogin, and
// redirects to where the login started.
func (l *Login) CallbackHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, p, f := l.callback(w, r)
		if f != nil {
			l.cfg.Logger.Info("oidc login refused", "code", f.Code, "reason", f.Message)
			l.writeRefusal(w, r, f)
			return
		}
		if err := l.cfg.OnLogin(w, r, id); err != nil {
			var rf *Refusal
			if errors.As(err, &rf) {
				l.cfg.Logger.Info("oidc login refused by the session layer", "code", rf.Code, "subject", id.Subject)
				l.writeRefusal(w, r, rf)
				return
			}
			l.internal(w, r, "recording the login", err)
			return
		}
		l.cfg.Logger.Info("oidc login", "issuer", id.Issuer, "subject", id.Subject)
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, p.ReturnTo, http.StatusSeeOther)
	})
}

func (l *Login) callback(w http.ResponseWriter, r *http.Request) (Identity, pending, *Refusal) {
	q := r.URL.Query()
	state := q.Get("state")
	var p pending // stays zero unless the state matches this browser's login
	// Whatever happens next, this login is over: clear its cookie.
	name := l.cookieName(state)
	cookie, cookieErr := r.Cookie(name)
	if state != "" && cookieErr == nil {
		l.clearCookie(w, name)
		if opened, err := l.sealer.open(name, cookie.Value); err == nil && subtle.ConstantTimeCompare([]byte(opened.State), []byte(state)) == 1 {
			p = opened
		}
	}
	matched := p.State != ""

	if e := q.Get("error"); e != "" {
		msg := "the provider refused the sign-in: " + errorCode(e)
		// The provider's own words only for an answer to this browser's
		// login: anyone can make a link to the callback with any text.
		if d := q.Get("error_description"); d != "" && matched {
			msg += " (" + clean(d, 200) + ")"
		}
		return Identity{}, p, refuse(http.StatusForbidden, CodeProviderError, "%s", msg)
	}
	if state == "" || cookieErr != nil {
		return Identity{}, p, refuse(http.StatusBadRequest, CodeStateMismatch,
			"no sign-in in progress in this browser matches this answer (it was already used, took too long, or was started in another browser): sign in again")
	}
	if !matched {
		return Identity{}, p, refuse(http.StatusBadRequest, CodeStateMismatch,
			"the sign-in answer does not match the sign-in this browser started (or companion restarted since): sign in again")
	}
	if !l.cfg.Clock.Now().Before(time.Unix(p.Expires, 0)) {
		return Identity{}, p, refuse(http.StatusBadRequest, CodeLoginExpired, "the sign-in took longer than %v: sign in again", l.cfg.LoginTTL)
	}
	code := q.Get("code")
	if code == "" {
		return Identity{}, p, refuse(http.StatusBadRequest, CodeInvalid, "the provider's answer has no code: sign in again")
	}

	ctx := oidc.ClientContext(r.Context(), l.cfg.HTTPClient)
	ctx = context.WithValue(ctx, oauth2.HTTPClient, l.cfg.HTTPClient)
	tok, err := l.oauth.Exchange(ctx, code, oauth2.VerifierOption(p.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
			return Identity{}, p, refuse(http.StatusBadRequest, CodeCodeRejected,
				"the provider refused the sign-in code (already used, expired, or not issued for this login): sign in again")
		}
		if errors.As(err, &re) {
			return Identity{}, p, refuse(http.StatusBadGateway, CodeProviderFailed, "the provider refused to redeem the sign-in code (%s): %s", clean(re.ErrorCode, 64), clean(re.ErrorDescription, 200))
		}
		return Identity{}, p, refuse(http.StatusBadGateway, CodeProviderFailed, "the provider could not be reached to finish the sign-in: try again shortly")
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		return Identity{}, p, refuse(http.StatusBadGateway, CodeTokenInvalid, "the provider's answer has no ID token")
	}
	idt, err := l.verifier.Verify(ctx, rawID)
	if err != nil {
		return Identity{}, p, refuse(http.StatusBadGateway, CodeTokenInvalid, "the provider's ID token failed verification: %s", clean(err.Error(), 200))
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(p.Nonce)) != 1 {
		return Identity{}, p, refuse(http.StatusBadRequest, CodeNonceMismatch, "the ID token was not issued for this sign-in (nonce mismatch): sign in again")
	}
	id, f := l.identity(ctx, idt, tok)
	return id, p, f
}

// errorCode keeps what an OAuth error code may contain (RFC 6749 4.1.2.1
// allows printable ASCII; real ones are words and underscores).
func errorCode(e string) string {
	var b strings.Builder
	for _, r := range e {
		if b.Len() == 64 {
			break
		}
		if r == '_' || r == '-' || r == '.' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// random is 32 bytes from the system's CSPRNG, base64url.
func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// safeReturnTo accepts a path on this site only: one leading slash (not
// "//host" or "/\host", which browsers take as another site), no control
// characters. "" stays "".
func safeReturnTo(s string) (string, bool) {
	if s == "" {
		return "", true
	}
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.HasPrefix(s, "/\\") || len(s) > 2048 {
		return "", false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return "", false
		}
	}
	return s, true
}
