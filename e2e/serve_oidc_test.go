package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport/oidcprovider"
)

// These tests sign in to the companion binary through real parts: the
// example OpenID provider of github.com/zitadel/oidc/v3 (serve --auth
// oidc) and oauth2-proxy in front of serve --auth proxy, both built from
// their Go modules by internal/testsupport/oidcprovider.

// meAnswer is GET /v1/me's body.
type meAnswer struct {
	User struct {
		ID, Name, Issuer string
		Admin            bool
	}
	Method string
}

// oidcServe starts companion serve --auth local,oidc on port under
// /api/companion against prov, with extra flags.
func oidcServe(t *testing.T, data string, port int, prov *oidcprovider.Provider, extra ...string) *proc {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "oidc-secret")
	if err := os.WriteFile(secret, []byte(oidcprovider.ClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--auth", "local,oidc", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--public-url", fmt.Sprintf("http://127.0.0.1:%d/api/companion", port),
		"--oidc-issuer", prov.Issuer, "--oidc-client-id", oidcprovider.ClientID, "--oidc-client-secret-file", secret,
		"--docker-scope", "unused"}, extra...)
	return start(t, options{mode: "serve", dataDir: data, args: args})
}

func oidcCallbackURL(port int) string {
	return fmt.Sprintf("http://127.0.0.1:%d/api/companion/v1/login/oidc/callback", port)
}

// browserClient is a webClient over an OpenID browser's cookie jar.
func browserClient(t *testing.T, base string, b *http.Client) *webClient {
	return &webClient{t: t, base: base, hc: b, header: http.Header{}}
}

// signInOIDC walks a real authorization-code round trip at the provider
// in a fresh browser and returns it signed in to companion.
func signInOIDC(t *testing.T, p *proc, prov *oidcprovider.Provider, u oidcprovider.User) *webClient {
	t.Helper()
	b := oidcprovider.NewBrowser(t)
	cb := prov.Authorize(t, b, p.ready.URL+"/v1/login/oidc", u)
	resp, body := oidcprovider.Get(t, b, cb.String())
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/api/companion/" {
		t.Fatalf("callback for %s: %s to %q, want 303 to the page /api/companion/: %.300s", u.Username, resp.Status, resp.Header.Get("Location"), body)
	}
	if sc := strings.Join(resp.Header.Values("Set-Cookie"), "\n"); !strings.Contains(sc, "companion_session_api_companion=cps_") ||
		!strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Lax") {
		t.Fatalf("callback's cookies %q: want the session cookie of a password login", sc)
	}
	return browserClient(t, p.ready.URL, b)
}

// refusedOIDC signs u in and expects the callback's JSON refusal code;
// the browser stays signed out.
func refusedOIDC(t *testing.T, p *proc, prov *oidcprovider.Provider, u oidcprovider.User, wantCode string) {
	t.Helper()
	b := oidcprovider.NewBrowser(t)
	cb := prov.Authorize(t, b, p.ready.URL+"/v1/login/oidc", u)
	req, _ := http.NewRequest("GET", cb.String(), nil)
	req.Header.Set("Accept", "application/json")
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e apiError
	json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusForbidden || e.Error.Code != wantCode {
		t.Fatalf("%s: %s %+v, want 403 %s", u.Username, resp.Status, e, wantCode)
	}
	if len(resp.Header.Values("Set-Cookie")) > 0 && strings.Contains(strings.Join(resp.Header.Values("Set-Cookie"), ";"), "cps_") {
		t.Fatalf("a refused login set a session cookie")
	}
	browserClient(t, p.ready.URL, b).must(401, "GET", "/v1/me", nil, nil)
}

// TestServeOIDCLogin: serve --auth local,oidc behind a base path. GET
// /v1/login names both methods; a real code flow at the provider signs a
// person in with a session cookie; they are keyed by issuer and subject
// (a second login is the same user, another subject with the same email
// is not); the first of them is the admin; a disallowed email domain is
// refused; logout ends the session; an OpenID user and a local user see
// 404 on each other's things; a workspace made before sign-in goes to the
// admin at her first sign-in. A second companion requiring a group the
// provider does not issue refuses the same person.
func TestServeOIDCLogin(t *testing.T) {
	dt := daytona.New(daytona.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
	api := httptest.NewServer(dt.Handler())
	t.Cleanup(func() { dt.Close(); api.Close() })

	alice := oidcprovider.User{ID: "sub-alice", Username: "alice", Password: "alice-pw-1", Email: "alice@example.com", EmailVerified: true, FirstName: "Alice", LastName: "A"}
	// The same (verified) email under another subject: another person.
	twin := oidcprovider.User{ID: "sub-twin", Username: "twin", Password: "twin-pw-1", Email: "alice@example.com", EmailVerified: true, FirstName: "Twin", LastName: "T"}
	mallory := oidcprovider.User{ID: "sub-mallory", Username: "mallory", Password: "mallory-pw-1", Email: "mallory@elsewhere.test", EmailVerified: true, FirstName: "M", LastName: "M"}
	port, groupPort := oidcprovider.FreePort(t), oidcprovider.FreePort(t)
	prov := oidcprovider.Start(t, oidcprovider.Options{
		RedirectURIs: []string{oidcCallbackURL(port), oidcCallbackURL(groupPort)},
		Users:        []oidcprovider.User{alice, twin, mallory},
	})

	data := t.TempDir()
	// Made before sign-in was turned on: nobody has signed in when serve
	// starts with --auth, so it goes to alice, the first admin, at her
	// first sign-in.
	pre := start(t, options{mode: "serve", dataDir: data, args: []string{"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--docker-scope", "unused"}})
	early := newWebClient(t, pre.ready.URL)
	early.bearer = pre.ready.Token
	_, earlyWs := early.addDaytona(api.URL+"/api", "early-box")
	waitStateOn(t, early, earlyWs, "running")
	pre.term()
	p := oidcServe(t, data, port, prov, "--oidc-allowed-domains", "example.com")

	var methods struct {
		Methods []string
		OIDCURL string `json:"oidc_url"`
	}
	anon := newWebClient(t, p.ready.URL)
	anon.must(200, "GET", "/v1/login", nil, &methods)
	if !slices.Equal(methods.Methods, []string{"local", "oidc"}) || methods.OIDCURL != "/api/companion/v1/login/oidc" {
		t.Fatalf("GET /v1/login: %+v", methods)
	}

	a1 := signInOIDC(t, p, prov, alice)
	var me meAnswer
	a1.must(200, "GET", "/v1/me", nil, &me)
	if me.User.Issuer != prov.Issuer || me.User.Name != alice.Email || !me.User.Admin || me.Method != "session" {
		t.Fatalf("me after the OpenID login: %+v, want issuer %s, name %s, admin (first user)", me, prov.Issuer, alice.Email)
	}
	aliceID := me.User.ID
	p.waitLog(handOverLog, map[string]string{"admin": alice.Email}, 10*time.Second)
	a1.must(200, "GET", "/v1/workspaces/"+earlyWs, nil, nil)
	var again meAnswer
	signInOIDC(t, p, prov, alice).must(200, "GET", "/v1/me", nil, &again)
	if again.User.ID != aliceID {
		t.Fatalf("a second login is user %s, want the same user %s", again.User.ID, aliceID)
	}
	var twinMe meAnswer
	signInOIDC(t, p, prov, twin).must(200, "GET", "/v1/me", nil, &twinMe)
	if twinMe.User.ID == aliceID || twinMe.User.Admin {
		t.Fatalf("another subject with alice's email: %+v, want another user, not admin", twinMe)
	}
	out := cli(t, "", "users", "list", "--data-dir", data)
	if strings.Count(out, prov.Issuer) != 2 {
		t.Fatalf("users list: want two users of issuer %s:\n%s", prov.Issuer, out)
	}

	// Probe: an email domain that is not allowed.
	refusedOIDC(t, p, prov, mallory, "oidc_domain_not_allowed")

	// A local user, added while serve runs, next to the OpenID one.
	addUser(t, data, "bob", "bob-password-22")
	bob := newWebClient(t, p.ready.URL)
	bob.login("bob", "bob-password-22")
	aliceAcct, aliceWs := a1.addDaytona(api.URL+"/api", "alice-box")
	bobAcct, bobWs := bob.addDaytona(api.URL+"/api", "bob-box")
	for _, probe := range []struct {
		who          *webClient
		acct, ws, as string
	}{{bob, aliceAcct, aliceWs, "bob"}, {a1, bobAcct, bobWs, "alice"}} {
		probe.who.must(404, "GET", "/v1/workspaces/"+probe.ws, nil, nil)
		probe.who.must(404, "POST", "/v1/workspaces/"+probe.ws+"/pause", nil, nil)
		probe.who.must(404, "DELETE", "/v1/accounts/"+probe.acct, nil, nil)
		var list struct{ Workspaces []workspace }
		probe.who.must(200, "GET", "/v1/workspaces", nil, &list)
		for _, w := range list.Workspaces {
			if w.ID == probe.ws {
				t.Fatalf("%s lists the other user's workspace %s", probe.as, w.ID)
			}
		}
	}
	a1.must(200, "GET", "/v1/workspaces/"+aliceWs, nil, nil)
	bob.must(404, "GET", "/v1/workspaces/"+earlyWs, nil, nil)
	twinClient := signInOIDC(t, p, prov, twin)
	twinClient.must(404, "GET", "/v1/workspaces/"+earlyWs, nil, nil)

	// Logout ends the OpenID session like any other.
	a1.must(204, "POST", "/v1/logout", nil, nil)
	a1.must(401, "GET", "/v1/me", nil, nil)

	// Probe: a required group the provider does not issue.
	g := oidcServe(t, t.TempDir(), groupPort, prov, "--oidc-group", "companion-users")
	refusedOIDC(t, g, prov, alice, "oidc_group_missing")
}

// TestServeOIDCStartErrors: a provider that cannot be discovered stops
// serve with a message naming it; missing flags are named before that.
func TestServeOIDCStartErrors(t *testing.T) {
	data := t.TempDir()
	secret := filepath.Join(t.TempDir(), "s")
	os.WriteFile(secret, []byte("x"), 0o600)
	run := func(args ...string) string {
		cmd := exec.Command(companionBin, append([]string{"serve", "--data-dir", data, "--docker-scope", "unused"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("serve %v started", args)
		}
		return string(out)
	}
	if out := run("--auth", "oidc", "--oidc-issuer", "http://127.0.0.1:1/", "--oidc-client-id", "c", "--oidc-client-secret-file", secret); !strings.Contains(out, "--public-url") {
		t.Fatalf("no public URL: %s", out)
	}
	if out := run("--auth", "oidc", "--public-url", "http://127.0.0.1:8080"); !strings.Contains(out, "--oidc-issuer") {
		t.Fatalf("no issuer: %s", out)
	}
	if out := run("--oidc-issuer", "http://127.0.0.1:1/"); !strings.Contains(out, "--auth oidc") {
		t.Fatalf("oidc flags without --auth oidc: %s", out)
	}
	// Nothing listens on port 1 of loopback: discovery fails after its
	// retries (30 s) and says what to check.
	if out := run("--auth", "oidc", "--listen", "127.0.0.1:0", "--public-url", "http://127.0.0.1:8080", "--oidc-issuer", "http://127.0.0.1:1/",
		"--oidc-client-id", "c", "--oidc-client-secret-file", secret); !strings.Contains(out, "discovering the provider at http://127.0.0.1:1/") {
		t.Fatalf("unreachable provider: %s", out)
	}
}

// TestServeBehindOAuth2Proxy: oauth2-proxy, signed in to the provider
// with a real code flow, is the ingress of serve --auth proxy. Requests
// through it reach companion as the provider's subject, the WebSocket
// stream works through it, and the same user header sent straight to
// companion from a peer outside --trusted-proxy is refused.
func TestServeBehindOAuth2Proxy(t *testing.T) {
	proxyPort, cPort := oidcprovider.FreePort(t), oidcprovider.FreePort(t)
	user := oidcprovider.User{ID: "sub-carol", Username: "carol", Password: "carol-pw-1", Email: "carol@example.com", EmailVerified: true, FirstName: "C", LastName: "C"}
	prov := oidcprovider.Start(t, oidcprovider.Options{RedirectURIs: []string{oidcprovider.ProxyRedirectURL(proxyPort)}, Users: []oidcprovider.User{user}})
	proxyURL := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)

	// oauth2-proxy connects from 127.0.0.1, the only trusted peer;
	// outsiders below come from 127.0.0.2.
	data := t.TempDir()
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "proxy", "--trusted-proxy", "127.0.0.1/32",
		"--user-header", "X-Forwarded-User", "--listen", fmt.Sprintf("127.0.0.1:%d", cPort),
		"--public-url", proxyURL, "--docker-scope", "unused"}})
	oidcprovider.StartOAuth2Proxy(t, oidcprovider.ProxyOptions{Provider: prov, Upstream: p.ready.URL + "/", Port: proxyPort})

	b := oidcprovider.NewBrowser(t)
	cb := prov.Authorize(t, b, proxyURL+"/v1/me", user)
	resp, body := oidcprovider.Follow(t, b, cb.String())
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/v1/me" {
		t.Fatalf("after the login through the proxy: %s at %s: %.300s", resp.Status, resp.Request.URL.Redacted(), body)
	}
	// Signed in, what the client exchanges with companion through
	// oauth2-proxy is checked against the API contract (its own sign-in
	// redirects and pages, above, are not companion's).
	contract.Register(proxyURL)
	t.Cleanup(func() {
		for _, f := range contract.Forget(proxyURL) {
			t.Error(f)
		}
	})
	var me meAnswer
	viaProxy := browserClient(t, proxyURL, b)
	viaProxy.must(200, "GET", "/v1/me", nil, &me)
	if me.User.Name != user.ID || me.User.Issuer != "proxy" || me.Method != "proxy" || !me.User.Admin {
		t.Fatalf("me through the proxy: %+v, want the subject %s named by the proxy (first user: admin)", me, user.ID)
	}
	// A header the browser sends itself is replaced by the proxy.
	viaProxy.header.Set("X-Forwarded-User", "someone-else")
	viaProxy.must(200, "GET", "/v1/me", nil, &me)
	if me.User.Name != user.ID {
		t.Fatalf("a browser-sent user header got through the proxy: %+v", me)
	}
	viaProxy.header.Del("X-Forwarded-User")

	// The stream through the proxy (oauth2-proxy passes upgrades on).
	ws, status := viaProxy.dialWS(-1, nil)
	if status != 101 {
		t.Fatalf("WebSocket through oauth2-proxy: %d, want 101", status)
	}
	if m := ws.next(15 * time.Second); m.Type != "snapshot" {
		t.Fatalf("first message through the proxy: %s", m.Raw)
	}

	// Probe: the same header straight to companion from an untrusted peer.
	outsider := newWebClient(t, p.ready.URL)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 10 * time.Second}
	outsider.hc.Transport = contract.Transport(&http.Transport{DialContext: d.DialContext})
	outsider.header.Set("X-Forwarded-User", user.ID)
	outsider.must(401, "GET", "/v1/me", nil, nil)
	outsider.header.Set("X-Forwarded-User", "new-admin")
	outsider.must(401, "GET", "/v1/workspaces", nil, nil)
	if out := cli(t, "", "users", "list", "--data-dir", data); strings.Contains(out, "new-admin") {
		t.Fatalf("a spoofed header made a user:\n%s", out)
	}
}
