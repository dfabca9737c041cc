package oidclogin

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
	"github.com/canvasapp/companion/internal/testsupport/oidcprovider"
)

func okConfig() Config {
	return Config{
		Issuer: "https://id.example.com", ClientID: "c", ClientSecret: "s",
		PublicURL: "https://companion.example.com", BasePath: "/api/companion",
		OnLogin: func(http.ResponseWriter, *http.Request, Identity) error { return nil },
	}
}

func TestConfigIsCheckedWithReasons(t *testing.T) {
	c, err := okConfig().check()
	if err != nil {
		t.Fatal(err)
	}
	if c.redirectURL != "https://companion.example.com/api/companion/v1/login/oidc/callback" || !c.secure || c.GroupClaim != "groups" {
		t.Fatalf("checked config %+v", c)
	}
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Issuer = "" }, "--oidc-issuer is required"},
		{func(c *Config) { c.Issuer = "http://id.example.com" }, "plain http"},
		{func(c *Config) { c.Issuer = "id.example.com" }, "not an http(s) URL"},
		{func(c *Config) { c.ClientID = "" }, "--oidc-client-id"},
		{func(c *Config) { c.ClientSecret = "" }, "client secret is empty"},
		{func(c *Config) { c.PublicURL = "" }, "--public-url is required"},
		{func(c *Config) { c.PublicURL = "https://x.example/?a=b" }, "without query"},
		{func(c *Config) { c.BasePath = "api/" }, "base path"},
		{func(c *Config) { c.AllowedDomains = []string{"bob@example.com"} }, "not a domain"},
		{func(c *Config) { c.CookieKey = []byte("short") }, "32 bytes"},
		{func(c *Config) { c.OnLogin = nil }, "OnLogin"},
	} {
		cfg := okConfig()
		tc.change(&cfg)
		if _, err := New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error containing %q, got %v", tc.want, err)
		}
	}
	// Plain http is fine on loopback, for development.
	cfg := okConfig()
	cfg.Issuer, cfg.PublicURL = "http://127.0.0.1:9/", "http://localhost:8080"
	if c, err := cfg.check(); err != nil || c.secure {
		t.Fatalf("loopback http: %v", err)
	}
}

func TestReadClientSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if s, err := ReadClientSecretFile(write("ok", "s3cret\n", 0o600)); err != nil || s != "s3cret" {
		t.Fatalf("%q %v", s, err)
	}
	for name, tc := range map[string]struct {
		path string
		want string
	}{
		"world-readable": {write("open", "s3cret", 0o644), "chmod 600"},
		"empty":          {write("empty", "\n", 0o600), "is empty"},
		"missing":        {filepath.Join(dir, "nope"), "no such file"},
		"unset":          {"", "--oidc-client-secret-file"},
	} {
		if _, err := ReadClientSecretFile(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want %q, got %v", name, tc.want, err)
		}
	}
}

func TestReturnToStaysOnThisSite(t *testing.T) {
	for in, ok := range map[string]bool{
		"": true, "/": true, "/app?x=1": true,
		"//evil.example": false, "/\\evil.example": false, "https://evil.example/": false,
		"evil": false, "/a\r\nSet-Cookie: x": false,
	} {
		if _, got := safeReturnTo(in); got != ok {
			t.Errorf("safeReturnTo(%q) = %v, want %v", in, got, ok)
		}
	}
}

func TestGroupClaimShapes(t *testing.T) {
	claims := map[string]any{
		"groups":                     []any{"a", 7, "b"},
		"https://example.com/groups": "solo",
		"realm_access":               map[string]any{"roles": []any{"admin"}},
	}
	for name, want := range map[string][]string{
		"groups": {"a", "b"}, "https://example.com/groups": {"solo"}, "realm_access.roles": {"admin"},
		"realm_access.nope": nil, "missing": nil,
	} {
		if got := stringList(lookup(claims, name)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// Discovery of an issuer where nothing listens fails, after its retries,
// with an error naming the issuer and what to check. The fake clock is
// advanced whenever discovery waits, so no real time passes.
func TestDiscoveryOfAnUnreachableIssuerFailsClearly(t *testing.T) {
	clk := fakeclock.New(time.Now())
	cfg := okConfig()
	cfg.Issuer = fmt.Sprintf("http://127.0.0.1:%d/", oidcprovider.FreePort(t))
	cfg.Clock = clk
	cfg.Logger = slog.New(slog.DiscardHandler)
	done := make(chan error, 1)
	go func() { _, err := New(context.Background(), cfg); done <- err }()
	var err error
	waits := 0
	for {
		select {
		case err = <-done:
		default:
			if clk.WaitForWaiters(1, 100*time.Millisecond) {
				clk.Advance(5 * time.Second)
				waits++
			}
			continue
		}
		break
	}
	if waits < 2 {
		t.Fatalf("discovery gave up after %d waits", waits)
	}
	if err == nil || !strings.Contains(err.Error(), cfg.Issuer) || !strings.Contains(err.Error(), "check --oidc-issuer") || !strings.Contains(err.Error(), "attempts") {
		t.Fatalf("error %v", err)
	}
}

// A provider that starts after companion is waited for.
func TestDiscoveryWaitsForASlowProvider(t *testing.T) {
	// Built first: on a fresh machine the build alone can outlast the 30 s
	// discovery waits for.
	oidcprovider.Build(t)
	port := oidcprovider.FreePort(t)
	var mu sync.Mutex
	var logs bytes.Buffer
	cfg := okConfig()
	cfg.Issuer = fmt.Sprintf("http://localhost:%d/", port)
	cfg.PublicURL = "http://127.0.0.1:1"
	cfg.Logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	done := make(chan error, 1)
	go func() { _, err := New(context.Background(), cfg); done <- err }()
	// Evidence that discovery failed at least once before the provider runs.
	testsupport.Until(t, 30*time.Second, "a failed discovery attempt", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), "provider not reachable yet")
	})
	oidcprovider.Start(t, oidcprovider.Options{Port: port})
	if err := <-done; err != nil {
		t.Fatalf("New after the provider started: %v", err)
	}
}

func TestIssuerMismatchSaysWhatToUse(t *testing.T) {
	prov := oidcprovider.Start(t, oidcprovider.Options{})
	cfg := okConfig()
	cfg.Issuer = strings.TrimSuffix(prov.Issuer, "/") // the provider's has a slash
	cfg.PublicURL = "http://127.0.0.1:1"
	_, err := New(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", prov.Issuer)) {
		t.Fatalf("want an error naming %q, got %v", prov.Issuer, err)
	}
}

func TestLoginExpires(t *testing.T) {
	clk := fakeclock.New(time.Now())
	r := newRig(t, rigOptions{config: func(c *Config) { c.Clock = clk }})
	cb := r.prov.Authorize(t, r.browser, r.startURL(), r.prov.DemoUser())
	clk.Advance(10*time.Minute + time.Second)
	status, code, _ := refusalCode(t, r.browser, cb.String())
	if status != http.StatusBadRequest || code != CodeLoginExpired {
		t.Fatalf("%d %s, want 400 %s", status, code, CodeLoginExpired)
	}
}

func TestManyStartsKeepFewLoginCookies(t *testing.T) {
	r := newRig(t, rigOptions{})
	for range 10 {
		oidcprovider.Get(t, r.browser, r.startURL())
	}
	u := r.login.RedirectURL()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	n := 0
	for _, c := range r.browser.Jar.Cookies(req.URL) {
		if strings.HasPrefix(c.Name, cookiePrefix) {
			n++
		}
	}
	if n == 0 || n > maxPending {
		t.Fatalf("%d login cookies after 10 starts, want 1..%d", n, maxPending)
	}
}

// Behind https the login cookie is Secure and __Secure- prefixed, so a
// browser neither sends it over plain http nor lets a plain-http page set it.
func TestHTTPSLoginCookieIsSecure(t *testing.T) {
	c, err := okConfig().check()
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSealer(nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &Login{cfg: c, sealer: s}
	w := httptest.NewRecorder()
	l.StartHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "https://companion.example.com/api/companion/v1/login/oidc", nil))
	cookies := w.Result().Cookies()
	if w.Code != http.StatusFound || len(cookies) != 1 {
		t.Fatalf("%d, cookies %v", w.Code, cookies)
	}
	if ck := cookies[0]; !strings.HasPrefix(ck.Name, "__Secure-"+cookiePrefix) || !ck.Secure || ck.Path != "/api/companion/v1/login/oidc" {
		t.Fatalf("cookie %+v", ck)
	}
}

func TestFlagsMakeAConfig(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f Flags
	f.Register(fs)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := fs.Parse([]string{"--oidc-issuer", "https://id.example.com", "--oidc-client-id", "companion",
		"--oidc-client-secret-file", secret, "--oidc-allowed-domains", "example.com, example.org", "--oidc-group", "devs"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Config("https://c.example.com", "/api", func(http.ResponseWriter, *http.Request, Identity) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.check()
	if err != nil {
		t.Fatal(err)
	}
	if c.ClientSecret != "s3cret" || !c.domains["example.org"] || c.RequiredGroup != "devs" || c.GroupClaim != "groups" ||
		c.redirectURL != "https://c.example.com/api/v1/login/oidc/callback" {
		t.Fatalf("config %+v", c)
	}
	f.SecretFile = ""
	if _, err := f.Config("https://c.example.com", "", nil, nil); err == nil || !strings.Contains(err.Error(), "--oidc-client-secret-file") {
		t.Fatalf("no secret file: %v", err)
	}
}
