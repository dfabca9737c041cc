package oidclogin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport/oidcprovider"
)

// These tests sign in through the real example OpenID provider of
// zitadel/oidc (built from its module by oidcprovider): real discovery, real
// codes, real signed ID tokens. Only the OnLogin callback is the test's.

const basePath = "/api/companion"

// rig is one provider, one companion-like server hosting the Login's
// routes under basePath, and a browser.
type rig struct {
	t       *testing.T
	prov    *oidcprovider.Provider
	srv     *httptest.Server
	login   *Login
	browser *http.Client

	mu     sync.Mutex
	logins []Identity
	logs   bytes.Buffer
}

type rigOptions struct {
	users  []oidcprovider.User
	config func(*Config)
	// onLogin replaces the default OnLogin (record, set a cookie).
	onLogin LoginFunc
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	r := &rig{t: t, browser: oidcprovider.NewBrowser(t)}
	var handler http.Handler = http.NotFoundHandler()
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { handler.ServeHTTP(w, req) }))
	t.Cleanup(r.srv.Close)
	r.prov = oidcprovider.Start(t, oidcprovider.Options{
		RedirectURIs: []string{r.srv.URL + basePath + CallbackPath},
		Users:        o.users,
	})
	cfg := Config{
		Issuer: r.prov.Issuer, ClientID: oidcprovider.ClientID, ClientSecret: oidcprovider.ClientSecret,
		PublicURL: r.srv.URL, BasePath: basePath,
		OnLogin: func(w http.ResponseWriter, req *http.Request, id Identity) error {
			r.mu.Lock()
			r.logins = append(r.logins, id)
			r.mu.Unlock()
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "from-onlogin", Path: "/"})
			return nil
		},
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{mu: &r.mu, w: &r.logs}, nil)),
	}
	if o.onLogin != nil {
		cfg.OnLogin = o.onLogin
	}
	if o.config != nil {
		o.config(&cfg)
	}
	login, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r.login = login
	mux := http.NewServeMux()
	login.Register(mux)
	handler = mux
	return r
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (r *rig) startURL() string { return r.srv.URL + basePath + StartPath }

func (r *rig) recorded() []Identity {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.logins)
}

// refusalCode reads the code of a JSON refusal answer.
func refusalCode(t *testing.T, b *http.Client, u string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: not a JSON error body: %v", resp.Status, err)
	}
	return resp.StatusCode, body.Error.Code, body.Error.Message
}

func TestLoginRoundTripYieldsIssuerAndSubject(t *testing.T) {
	r := newRig(t, rigOptions{})
	user := r.prov.DemoUser()
	cb := r.prov.Authorize(t, r.browser, r.startURL()+"?return_to=/app/ws%3Fx=1", user)
	if got := cb.Scheme + "://" + cb.Host + cb.Path; got != r.login.RedirectURL() {
		t.Fatalf("provider sent the browser to %s, want the redirect URL %s", got, r.login.RedirectURL())
	}
	resp, body := oidcprovider.Get(t, r.browser, cb.String())
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/app/ws?x=1" {
		t.Fatalf("callback: %s Location=%q: %s", resp.Status, resp.Header.Get("Location"), body)
	}
	ids := r.recorded()
	if len(ids) != 1 {
		t.Fatalf("OnLogin called %d times, want 1", len(ids))
	}
	id := ids[0]
	if id.Issuer != r.prov.Issuer || id.Subject != user.ID {
		t.Fatalf("identity (%q, %q), want (%q, %q)", id.Issuer, id.Subject, r.prov.Issuer, user.ID)
	}
	if id.Email != user.Email || !id.EmailVerified || id.Name != "Test User" {
		t.Fatalf("identity details %+v", id)
	}
	// OnLogin's cookie was set; the login cookie was cleared.
	var sawSession, cleared bool
	for _, c := range resp.Cookies() {
		sawSession = sawSession || c.Name == "session"
		cleared = cleared || (strings.HasPrefix(c.Name, cookiePrefix) && c.MaxAge < 0)
	}
	if !sawSession || !cleared {
		t.Fatalf("callback cookies %v: want OnLogin's session cookie and the login cookie cleared", resp.Header.Values("Set-Cookie"))
	}
	if strings.Contains(r.logs.String(), cb.Query().Get("code")) {
		t.Fatal("the log contains the authorization code")
	}
}

func TestStartSetsAGuardedLoginCookieAndPKCE(t *testing.T) {
	r := newRig(t, rigOptions{})
	resp, _ := oidcprovider.Get(t, r.browser, r.startURL())
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("start: %s", resp.Status)
	}
	loc, _ := resp.Location()
	q := loc.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" {
		t.Fatalf("authorize URL lacks PKCE S256, nonce or state: %s", loc)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("start set %d cookies", len(cookies))
	}
	c := cookies[0]
	if c.Name != cookiePrefix+q.Get("state") || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != basePath+StartPath || c.MaxAge <= 0 || c.MaxAge > 600 {
		t.Fatalf("login cookie %+v", c)
	}
	for _, secret := range []string{q.Get("nonce"), q.Get("state")} {
		if strings.Contains(c.Value, secret) {
			t.Fatal("the login cookie shows its contents")
		}
	}
	if resp, _ := oidcprovider.Get(t, r.browser, r.startURL()+"?return_to=//evil.example/x"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("return_to to another site: %s, want 400", resp.Status)
	}
}

func TestTamperedStateIsRefused(t *testing.T) {
	r := newRig(t, rigOptions{})
	cb := r.prov.Authorize(t, r.browser, r.startURL(), r.prov.DemoUser())
	q := cb.Query()
	st := q.Get("state")
	flip := "A" // a different last character, whatever the state ends with
	if strings.HasSuffix(st, flip) {
		flip = "B"
	}
	for name, state := range map[string]string{
		"changed": st[:len(st)-1] + flip,
		"missing": "",
	} {
		bad := *cb
		qq := cb.Query()
		qq.Set("state", state)
		bad.RawQuery = qq.Encode()
		status, code, _ := refusalCode(t, r.browser, bad.String())
		if status != http.StatusBadRequest || code != CodeStateMismatch {
			t.Errorf("%s state: %d %s, want 400 %s", name, status, code, CodeStateMismatch)
		}
	}
	// A callback carried to another browser (login CSRF: an attacker's code
	// in a victim's browser) has no login cookie there.
	status, code, _ := refusalCode(t, oidcprovider.NewBrowser(t), cb.String())
	if status != http.StatusBadRequest || code != CodeStateMismatch {
		t.Errorf("callback in another browser: %d %s", status, code)
	}
	if n := len(r.recorded()); n != 0 {
		t.Fatalf("OnLogin called %d times for refused callbacks", n)
	}
	// The untampered callback still works: the refusals above consumed nothing.
	if resp, body := oidcprovider.Get(t, r.browser, cb.String()); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("untampered callback: %s %s", resp.Status, body)
	}
}

func TestReplayedCallbackIsRefused(t *testing.T) {
	r := newRig(t, rigOptions{})
	cb := r.prov.Authorize(t, r.browser, r.startURL(), r.prov.DemoUser())
	// Keep the login cookie as an attacker who copied it would.
	u, _ := url.Parse(r.srv.URL + basePath + CallbackPath)
	var stolen *http.Cookie
	for _, c := range r.browser.Jar.Cookies(u) {
		if strings.HasPrefix(c.Name, cookiePrefix) {
			stolen = c
		}
	}
	if stolen == nil {
		t.Fatal("no login cookie in the browser")
	}
	if resp, body := oidcprovider.Get(t, r.browser, cb.String()); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first callback: %s %s", resp.Status, body)
	}
	// The same browser again: its login cookie is gone.
	status, code, _ := refusalCode(t, r.browser, cb.String())
	if status != http.StatusBadRequest || code != CodeStateMismatch {
		t.Fatalf("replay in the same browser: %d %s", status, code)
	}
	// With the copied cookie put back: the provider refuses the used code.
	r.browser.Jar.SetCookies(u, []*http.Cookie{{Name: stolen.Name, Value: stolen.Value, Path: basePath + StartPath}})
	status, code, msg := refusalCode(t, r.browser, cb.String())
	if status != http.StatusBadRequest || code != CodeCodeRejected {
		t.Fatalf("replay with the cookie: %d %s %s", status, code, msg)
	}
	if strings.Contains(msg, cb.Query().Get("code")) {
		t.Fatal("the refusal shows the code")
	}
	if n := len(r.recorded()); n != 1 {
		t.Fatalf("OnLogin called %d times, want 1", n)
	}
}

// The provider cannot be made to put a wrong nonce in its ID token, so the
// test changes the nonce the browser's login remembers: the code, the
// exchange and the ID token are all real; only the expectation differs.
func TestWrongNonceIsRefused(t *testing.T) {
	r := newRig(t, rigOptions{})
	cb := r.prov.Authorize(t, r.browser, r.startURL(), r.prov.DemoUser())
	u, _ := url.Parse(r.srv.URL + basePath + CallbackPath)
	var resealed bool
	for _, c := range r.browser.Jar.Cookies(u) {
		if !strings.HasPrefix(c.Name, cookiePrefix) {
			continue
		}
		p, err := r.login.sealer.open(c.Name, c.Value)
		if err != nil {
			t.Fatal(err)
		}
		p.Nonce = random()
		v, err := r.login.sealer.seal(c.Name, p)
		if err != nil {
			t.Fatal(err)
		}
		r.browser.Jar.SetCookies(u, []*http.Cookie{{Name: c.Name, Value: v, Path: basePath + StartPath}})
		resealed = true
	}
	if !resealed {
		t.Fatal("no login cookie to change")
	}
	status, code, _ := refusalCode(t, r.browser, cb.String())
	if status != http.StatusBadRequest || code != CodeNonceMismatch {
		t.Fatalf("wrong nonce: %d %s, want 400 %s", status, code, CodeNonceMismatch)
	}
	if n := len(r.recorded()); n != 0 {
		t.Fatalf("OnLogin called %d times", n)
	}
}

func TestForgedLoginCookieIsRefused(t *testing.T) {
	r := newRig(t, rigOptions{})
	cb := r.prov.Authorize(t, r.browser, r.startURL(), r.prov.DemoUser())
	u, _ := url.Parse(r.srv.URL + basePath + CallbackPath)
	other, err := newSealer(nil) // a cookie sealed under another key
	if err != nil {
		t.Fatal(err)
	}
	name := cookiePrefix + cb.Query().Get("state")
	v, _ := other.seal(name, pending{State: cb.Query().Get("state"), Nonce: "n", Verifier: "v", ReturnTo: "/", Expires: time.Now().Add(time.Hour).Unix()})
	r.browser.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: v, Path: basePath + StartPath}})
	status, code, _ := refusalCode(t, r.browser, cb.String())
	if status != http.StatusBadRequest || code != CodeStateMismatch {
		t.Fatalf("forged cookie: %d %s", status, code)
	}
	// Sealed with the right key under the state's name, but for another
	// state: the sealed state must match too.
	cb = r.prov.Authorize(t, r.browser, r.startURL(), r.prov.DemoUser())
	name = cookiePrefix + cb.Query().Get("state")
	v, _ = r.login.sealer.seal(name, pending{State: random(), Nonce: "n", Verifier: "v", ReturnTo: "/", Expires: time.Now().Add(time.Hour).Unix()})
	r.browser.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: v, Path: basePath + StartPath}})
	status, code, _ = refusalCode(t, r.browser, cb.String())
	if status != http.StatusBadRequest || code != CodeStateMismatch {
		t.Fatalf("cookie for another state: %d %s", status, code)
	}
}

func TestEmailDomainRules(t *testing.T) {
	users := []oidcprovider.User{
		{ID: "sub-ok", Username: "ok", Password: "pw-ok", Email: "Alice@Example.COM", EmailVerified: true, FirstName: "A", LastName: "L"},
		{ID: "sub-other", Username: "other", Password: "pw-other", Email: "bob@elsewhere.test", EmailVerified: true},
		{ID: "sub-unverified", Username: "unverified", Password: "pw-unv", Email: "carol@example.com", EmailVerified: false},
	}
	r := newRig(t, rigOptions{users: users, config: func(c *Config) { c.AllowedDomains = []string{"example.com"} }})
	for _, tc := range []struct {
		user   oidcprovider.User
		status int
		code   string
	}{
		{users[1], http.StatusForbidden, CodeDomainNotAllow},
		{users[2], http.StatusForbidden, CodeEmailUnverified},
	} {
		cb := r.prov.Authorize(t, r.browser, r.startURL(), tc.user)
		status, code, msg := refusalCode(t, r.browser, cb.String())
		if status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s (%s), want %d %s", tc.user.Username, status, code, msg, tc.status, tc.code)
		}
	}
	if n := len(r.recorded()); n != 0 {
		t.Fatalf("OnLogin called %d times for refused people", n)
	}
	cb := r.prov.Authorize(t, r.browser, r.startURL(), users[0])
	if resp, body := oidcprovider.Get(t, r.browser, cb.String()); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("allowed domain (any case): %s %s", resp.Status, body)
	}
	if ids := r.recorded(); len(ids) != 1 || ids[0].Subject != "sub-ok" {
		t.Fatalf("logins %+v", ids)
	}
}

func TestRequiredGroup(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		r := newRig(t, rigOptions{config: func(c *Config) { c.RequiredGroup = "companion-users" }})
		cb := r.prov.Authorize(t, r.browser, r.startURL(), r.prov.DemoUser())
		status, code, msg := refusalCode(t, r.browser, cb.String())
		if status != http.StatusForbidden || code != CodeGroupMissing {
			t.Fatalf("%d %s %s, want 403 %s", status, code, msg, CodeGroupMissing)
		}
		if !strings.Contains(msg, `"groups"`) {
			t.Fatalf("message %q does not name the claim", msg)
		}
	})
	// The example provider issues no groups; its custom scope yields
	// {"custom_claim": {"other": "stuff", …}}, which a dotted claim path reaches.
	t.Run("present", func(t *testing.T) {
		r := newRig(t, rigOptions{config: func(c *Config) {
			c.ExtraScopes = []string{"custom_scope"}
			c.GroupClaim = "custom_claim.other"
			c.RequiredGroup = "stuff"
		}})
		cb := r.prov.Authorize(t, r.browser, r.startURL(), r.prov.DemoUser())
		if resp, body := oidcprovider.Get(t, r.browser, cb.String()); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s %s", resp.Status, body)
		}
		if ids := r.recorded(); len(ids) != 1 || !slices.Equal(ids[0].Groups, []string{"stuff"}) {
			t.Fatalf("logins %+v", ids)
		}
	})
}

func TestProviderErrorIsShownSafely(t *testing.T) {
	r := newRig(t, rigOptions{})
	resp, _ := oidcprovider.Get(t, r.browser, r.startURL())
	loc, _ := resp.Location()
	state := loc.Query().Get("state")
	cb := r.login.RedirectURL() + "?" + url.Values{
		"state": {state}, "error": {"access_denied"}, "error_description": {"<script>alert(1)</script>"},
	}.Encode()
	resp, body := oidcprovider.Get(t, r.browser, cb)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, CodeProviderError) || !strings.Contains(body, "access_denied") {
		t.Fatalf("%s %s", resp.Status, body)
	}
	if strings.Contains(body, "<script>") || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("the provider's text reached the page unescaped or without a CSP: %s", body)
	}
	if !strings.Contains(body, "&lt;script&gt;") {
		t.Fatalf("the provider's description is missing for this browser's own login: %s", body)
	}
	// A link made by someone else shows the error code only, not their text.
	_, body = oidcprovider.Get(t, oidcprovider.NewBrowser(t), cb)
	if !strings.Contains(body, "access_denied") || strings.Contains(body, "alert") {
		t.Fatalf("a foreign callback link showed its text: %s", body)
	}
	// The login is over: its cookie was cleared.
	status, code, _ := refusalCode(t, r.browser, r.login.RedirectURL()+"?state="+state+"&code=x")
	if status != http.StatusBadRequest || code != CodeStateMismatch {
		t.Fatalf("after the error the login still open: %d %s", status, code)
	}
}

func TestOnLoginRefusalAndFailure(t *testing.T) {
	var fail error
	r := newRig(t, rigOptions{onLogin: func(http.ResponseWriter, *http.Request, Identity) error { return fail }})
	fail = &Refusal{Status: http.StatusForbidden, Code: "user_disabled", Message: "this account is disabled"}
	cb := r.prov.Authorize(t, r.browser, r.startURL(), r.prov.DemoUser())
	if status, code, _ := refusalCode(t, r.browser, cb.String()); status != http.StatusForbidden || code != "user_disabled" {
		t.Fatalf("refusal: %d %s", status, code)
	}
	fail = errors.New("database is locked")
	cb = r.prov.Authorize(t, r.browser, r.startURL(), r.prov.DemoUser())
	status, code, msg := refusalCode(t, r.browser, cb.String())
	if status != http.StatusInternalServerError || code != "internal" || strings.Contains(msg, "database") || !strings.Contains(msg, "ref ") {
		t.Fatalf("failure: %d %s %s", status, code, msg)
	}
}
