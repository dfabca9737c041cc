package uibridge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
)

// GET /v1/login answers, without a credential, which methods are on and
// where the OpenID Connect sign-in starts (base path included); the
// OpenID routes are open without a credential, and their redirects keep
// the Location they set (it already holds the base path) while other
// routes' relative Locations get the base path added.
func TestLoginMethodsAndOIDCRoutes(t *testing.T) {
	st := openStore(t)
	var login *Login
	started := 0
	e := newEnvWith(t, st, &core.Registry{}, func(c *Config) {
		login = &Login{Auth: auth.New(auth.Config{Store: st, Params: auth.Params{MemoryKiB: 64, Time: 1, Threads: 1}}),
			Local: true, BasePath: "/api/companion",
			Ingress: auth.Ingress{Trusted: []netip.Prefix{netip.MustParsePrefix("10.9.9.9/32")}}, Proxy: &Proxy{UserHeader: "X-Forwarded-User"},
			OIDC: &OIDCRoutes{
				Start: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					started++
					http.Redirect(w, r, "https://id.example/authorize?x=1", http.StatusFound)
				}),
				Callback: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, "/api/companion/", http.StatusSeeOther)
				}),
			}}
		c.Login = login
		c.Token = ""
	})
	h := e.srv.Handler()
	get := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.Host = "127.0.0.1:" + strconv.Itoa(e.port)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := get("/api/companion/v1/login")
	var m LoginMethods
	if err := json.Unmarshal(rec.Body.Bytes(), &m); rec.Code != 200 || err != nil {
		t.Fatalf("GET /v1/login: %d %s", rec.Code, rec.Body)
	}
	if !slices.Equal(m.Methods, []string{"local", "oidc", "proxy"}) || m.OIDCURL != "/api/companion/v1/login/oidc" {
		t.Fatalf("methods %+v", m)
	}
	if rec := get("/api/companion/v1/login/oidc"); rec.Code != 302 || rec.Header().Get("Location") != "https://id.example/authorize?x=1" || started != 1 {
		t.Fatalf("start: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	if rec := get("/api/companion/v1/login/oidc/callback?code=x&state=y"); rec.Code != 303 || rec.Header().Get("Location") != "/api/companion/" {
		t.Fatalf("callback: %d Location %q, want the page's path once", rec.Code, rec.Header().Get("Location"))
	}
	if rec := get("/api/companion/v1/me"); rec.Code != 401 {
		t.Fatalf("/v1/me without a credential: %d", rec.Code)
	}

	// Without OpenID Connect the answer has no oidc_url and the routes are
	// not there.
	login.OIDC = nil
	if m := login.methods(); !slices.Equal(m.Methods, []string{"local", "proxy"}) || m.OIDCURL != "" {
		t.Fatalf("methods without oidc: %+v", m)
	}
}
