package uibridge

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
)

// Over https the cookie is Secure, host-only and __Host- (Path=/ even with
// a base path, see docs/decisions.md); routes and Location carry the base
// path; a request outside it is 404.
func TestLoginCookieAndBasePath(t *testing.T) {
	st := openStore(t)
	var login *Login
	e := newEnvWith(t, st, &core.Registry{}, func(c *Config) {
		pub, _ := url.Parse("https://canvas.example.com/api/companion")
		login = &Login{Auth: auth.New(auth.Config{Store: st, Params: auth.Params{MemoryKiB: 64, Time: 1, Threads: 1}}),
			Local: true, PublicURL: pub, BasePath: "/api/companion"}
		c.Login = login
		c.Token = ""
		c.AllowedHosts = append(c.AllowedHosts, "canvas.example.com")
		c.AllowedOrigins = []string{"https://canvas.example.com"}
	})
	if _, err := login.Auth.AddLocalUser(context.Background(), "alice", "alice-password", false); err != nil {
		t.Fatal(err)
	}
	h := e.srv.Handler()
	send := func(method, path, body string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Host = "127.0.0.1:" + strconv.Itoa(e.port)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := send("GET", "/healthz", ""); rec.Code != 404 {
		t.Fatalf("outside the base path: %d", rec.Code)
	}
	rec := send("POST", "/api/companion/v1/login", `{"name":"alice","password":"alice-password"}`)
	if rec.Code != 200 {
		t.Fatalf("login: %d %s", rec.Code, rec.Body)
	}
	sc := rec.Header().Get("Set-Cookie")
	for _, want := range []string{"__Host-companion_api_companion=cps_", "Path=/;", "HttpOnly", "Secure", "SameSite=Lax"} {
		if !strings.Contains(sc, want) {
			t.Fatalf("Set-Cookie %q lacks %q", sc, want)
		}
	}
	if strings.Contains(sc, "Domain") {
		t.Fatalf("a __Host- cookie must be host-only: %q", sc)
	}
	cookie := strings.Split(sc, ";")[0]
	rec = send("POST", "/api/companion/v1/tokens", `{"label":"x"}`, "Cookie", cookie, "Origin", "https://canvas.example.com")
	if rec.Code != 201 || !strings.HasPrefix(rec.Header().Get("Location"), "/api/companion/v1/tokens/tok_") {
		t.Fatalf("create token: %d, Location %q", rec.Code, rec.Header().Get("Location"))
	}
	// Another login method (OpenID Connect) signs a user in through SignIn.
	ext, err := login.Auth.ExternalUser(context.Background(), "https://id.example", "sub-9", "dora")
	if err != nil {
		t.Fatal(err)
	}
	sr := httptest.NewRecorder()
	if err := login.SignIn(context.Background(), sr, ext, "oidc"); err != nil {
		t.Fatal(err)
	}
	rec = send("GET", "/api/companion/v1/me", "", "Cookie", strings.Split(sr.Header().Get("Set-Cookie"), ";")[0])
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"issuer":"https://id.example"`) {
		t.Fatalf("me after SignIn: %d %s", rec.Code, rec.Body)
	}
	// Routes under /v1/login/ are reachable without a credential.
	if rec := send("GET", "/api/companion/v1/login/oidc", ""); rec.Code != 404 || !strings.Contains(rec.Body.String(), "no such route") {
		t.Fatalf("unregistered login route: %d %s, want the router's 404, not 401", rec.Code, rec.Body)
	}
	// The launch token does not exist here: an empty bearer is nobody.
	if rec := send("GET", "/api/companion/v1/me", "", "Authorization", "Bearer "); rec.Code != 401 {
		t.Fatalf("empty bearer: %d", rec.Code)
	}
	// A cookie of the http name is not read over https.
	if rec := send("GET", "/api/companion/v1/me", "", "Cookie", strings.Replace(cookie, "__Host-companion", "companion_session", 1)); rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong cookie name: %d", rec.Code)
	}
}

// The client address failed logins count against: the peer, or from a
// trusted ingress the right-most X-Forwarded-For hop it did not add
// itself; forwarding headers from anyone else never reach a handler.
func TestIngressBelievesOnlyTrustedPeers(t *testing.T) {
	l := &Login{Ingress: auth.Ingress{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/30")}}, Proxy: &Proxy{UserHeader: "X-User"}}
	var got struct {
		addr, host, user, xff string
	}
	h := l.ingress(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.addr, got.host, got.user, got.xff = clientAddr(r), r.Host, r.Header.Get("X-User"), r.Header.Get("X-Forwarded-For")
	}), slogTo(io.Discard))
	for _, c := range []struct {
		peer, xff, wantAddr, wantUser, wantHost string
	}{
		{"10.0.0.1:5000", "6.6.6.6, 1.2.3.4, 10.0.0.2", "1.2.3.4", "alice", "public.example"},
		{"10.0.0.1:5000", "", "10.0.0.1", "alice", "public.example"},
		{"10.0.0.9:5000", "1.2.3.4", "10.0.0.9", "", "companion.internal"},
		{"[::1]:5000", "1.2.3.4", "::1", "", "companion.internal"},
	} {
		req := httptest.NewRequest("GET", "/v1/me", nil)
		req.RemoteAddr = c.peer
		req.Host = "companion.internal"
		req.Header.Set("X-User", "alice")
		req.Header.Set("X-Forwarded-Host", "public.example")
		if c.xff != "" {
			req.Header.Set("X-Forwarded-For", c.xff)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if got.addr != c.wantAddr || got.user != c.wantUser || got.host != c.wantHost {
			t.Errorf("peer %s, X-Forwarded-For %q: client %q user %q host %q; want %q %q %q",
				c.peer, c.xff, got.addr, got.user, got.host, c.wantAddr, c.wantUser, c.wantHost)
		}
		if c.wantUser == "" && got.xff != "" {
			t.Errorf("peer %s: X-Forwarded-For reached the handler", c.peer)
		}
	}
}

// Without --auth proxy (--auth local or oidc behind an ingress) the
// trusted ingress still names the client; nobody else can, and the first
// peer that tries is named in a warning (it may be an ingress missing
// from --trusted-proxy).
func TestIngressNamesClientWithoutProxyAuth(t *testing.T) {
	l := &Login{Ingress: auth.Ingress{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
	var addr, xff string
	var logs strings.Builder
	h := l.ingress(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr, xff = clientAddr(r), r.Header.Get("X-Forwarded-For")
	}), slogTo(&logs))
	for _, c := range []struct{ peer, xff, want string }{
		{"127.0.0.1:5000", "6.6.6.6, 198.51.100.1", "198.51.100.1"},
		{"127.0.0.2:5000", "198.51.100.1", "127.0.0.2"},
		{"127.0.0.3:5000", "198.51.100.1", "127.0.0.3"},
	} {
		req := httptest.NewRequest("POST", "/v1/login", nil)
		req.RemoteAddr = c.peer
		req.Header.Set("X-Forwarded-For", c.xff)
		h.ServeHTTP(httptest.NewRecorder(), req)
		if addr != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: client %q, want %q", c.peer, c.xff, addr, c.want)
		}
		if c.want != "198.51.100.1" && xff != "" {
			t.Errorf("peer %s: X-Forwarded-For reached the handler", c.peer)
		}
	}
	if n := strings.Count(logs.String(), "not in --trusted-proxy"); n != 1 || !strings.Contains(logs.String(), "127.0.0.2") {
		t.Errorf("want one warning naming the first untrusted peer, got %d:\n%s", n, logs.String())
	}
}

// AdminArrived runs once per admin per process, before that admin's first
// request is answered, and never for a user who is not an admin.
func TestAdminArrivedOncePerAdmin(t *testing.T) {
	st := openStore(t)
	users := auth.New(auth.Config{Store: st})
	var mu sync.Mutex
	var calls [][]auth.User // the users at each call
	e := newEnvWith(t, st, &core.Registry{}, func(c *Config) {
		c.Token = ""
		c.Login = &Login{Auth: users,
			Ingress: auth.Ingress{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, Proxy: &Proxy{UserHeader: "X-User"},
			AdminArrived: func(ctx context.Context) {
				us, err := users.ListUsers(ctx)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				calls = append(calls, us)
				mu.Unlock()
			}}
	})
	for _, name := range []string{"carol", "carol", "dave", "carol", "dave"} {
		if resp, body := e.do("GET", "/v1/me", "", "Authorization", "", "X-User", name); resp.StatusCode != 200 || !strings.Contains(string(body), `"`+name+`"`) {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// carol is the first user, so the admin, and exists when the hook runs.
	if len(calls) != 1 || len(calls[0]) != 1 || calls[0][0].Name != "carol" || !calls[0][0].Admin {
		t.Fatalf("AdminArrived calls %+v, want one, after carol was made admin", calls)
	}
}
