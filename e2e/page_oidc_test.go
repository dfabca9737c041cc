package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport/oidcprovider"
)

// TestPageServeOpenIDSignIn: the page of companion serve --auth local,oidc
// under --base-path /api/companion, against the zitadel example OpenID
// provider, in Chromium. The OpenID button leads to the provider's own
// login form; filled in and submitted, it brings the person back to the
// page signed in (the user from /v1/me, the live workspace table); the
// providers section shows each first-party module's pinned SHA-256 and the
// hosts its manifest declares, as "companion providers list" reports them,
// and what each provider deletes on its own (its deletion clocks) in words;
// logout ends the session. The page logs no error and violates no CSP rule.
func TestPageServeOpenIDSignIn(t *testing.T) {
	alice := oidcprovider.User{ID: "sub-alice", Username: "alice", Password: "alice-pw-1", Email: "alice@example.com", EmailVerified: true, FirstName: "Alice", LastName: "A"}
	port := oidcprovider.FreePort(t)
	prov := oidcprovider.Start(t, oidcprovider.Options{RedirectURIs: []string{oidcCallbackURL(port)}, Users: []oidcprovider.User{alice}})
	p := oidcServe(t, t.TempDir(), port, prov, "--base-path", "/api/companion")
	prefix := strings.TrimSuffix(p.ready.PageURL, "/")

	tb := openTab(t, p.ready.PageURL, 1400, 1000)
	tb.waitJS("the OpenID button next to the password form", fmt.Sprintf(`!document.querySelector("#login").hidden && !document.querySelector("#login-form").hidden
	  && !document.querySelector("#oidc").hidden && document.querySelector("#oidc").href === %q`, prefix+"/v1/login/oidc"), 30*time.Second)

	// The provider's own form, on the provider's site.
	tb.click("#oidc")
	issuerHost := strings.TrimSuffix(strings.TrimPrefix(prov.Issuer, "http://"), "/")
	tb.waitJS("the provider's login form", fmt.Sprintf(`location.host === %q && document.querySelector('form input[name="id"]') && document.querySelector("#username")`, issuerHost), 30*time.Second)
	tb.typeInto("#username", alice.Username)
	tb.typeInto("#password", alice.Password)
	tb.click(`form button[type="submit"]`)

	// Back on the page, signed in as the provider's user.
	tb.waitJS("the page signed in", fmt.Sprintf(`location.href === %q && document.querySelector("#login").hidden && !document.querySelector("#main").hidden
	  && document.querySelector("#conn").dataset.state === "live"`, p.ready.PageURL), 60*time.Second)
	tb.waitJS("who is signed in", fmt.Sprintf(`document.querySelector("#me").textContent.includes(%q) && !document.querySelector("#logout").hidden`, alice.Email), 30*time.Second)
	tb.waitJS("the workspace table", `document.querySelector("#ws-table") && !document.querySelector("#ws-empty").hidden`, 30*time.Second)
	var me meAnswer
	if err := json.Unmarshal([]byte(evalIn[string](tb, `fetch("v1/me").then(r => r.text())`)), &me); err != nil || me.User.Issuer != prov.Issuer || me.User.Name != alice.Email {
		t.Fatalf("GET v1/me from the page: %+v (%v), want %s of %s", me, err, alice.Email, prov.Issuer)
	}

	// The providers section: each first-party module's hash and hosts,
	// as the registry on disk reports them (any data dir: they are
	// embedded in the binary).
	var mods []struct {
		Name, SHA256 string
		Hosts        []string
		Endpoint     *struct{ Hosts []string }
	}
	if err := json.Unmarshal([]byte(cli(t, "", "providers", "list", "--json", "--data-dir", t.TempDir())), &mods); err != nil || len(mods) == 0 {
		t.Fatalf("providers list --json: %v %+v", err, mods)
	}
	for _, m := range mods {
		cell := fmt.Sprintf(`#providers-table tr[data-provider=%q] td:last-child`, m.Name)
		tb.waitJS(m.Name+"'s module facts", fmt.Sprintf(`document.querySelector(%q) && document.querySelector(%q).textContent.includes(%q)`, cell, cell, m.SHA256), 30*time.Second)
		text := tb.text(cell)
		want := slices.Clone(m.Hosts)
		if m.Endpoint != nil {
			want = append(want, m.Endpoint.Hosts...)
		}
		for _, h := range want {
			if !strings.Contains(text, h) {
				t.Errorf("the providers section shows %s as %q: host %s missing", m.Name, text, h)
			}
		}
	}
	if got := tb.text(`#providers-table tr[data-provider="docker"] td:last-child`); got != "built in" {
		t.Errorf("docker's module cell %q, want \"built in\"", got)
	}
	// What each provider deletes on its own (its deletion clocks), in
	// words, as GET /v1/providers carries them.
	for name, want := range map[string]string{
		"daytona":      "deletes the box the paused TTL after it stops, when asked at create",
		"digitalocean": "may destroy an idle box after a period it does not publish",
		"e2b":          "none",
		"docker":       "none",
	} {
		if got := tb.text(fmt.Sprintf(`#providers-table tr[data-provider=%q] td.clocks`, name)); !strings.HasPrefix(got, want) {
			t.Errorf("the providers section says %s deletes on its own %q, want %q", name, got, want)
		}
	}
	var provs struct {
		Providers []struct {
			Name   string
			Clocks []map[string]any
		}
	}
	if err := json.Unmarshal([]byte(evalIn[string](tb, `fetch("v1/providers").then(r => r.text())`)), &provs); err != nil {
		t.Fatal(err)
	}
	for _, pr := range provs.Providers {
		if pr.Name == "daytona" && (len(pr.Clocks) != 1 || pr.Clocks[0]["name"] != "auto_delete" || pr.Clocks[0]["after_seconds"] != 0.0 || pr.Clocks[0]["setting"] != true) {
			t.Errorf("GET /v1/providers gives daytona clocks %v", pr.Clocks)
		}
	}

	tb.click("#logout")
	tb.waitJS("the login form again", `!document.querySelector("#login").hidden && document.querySelector("#main").hidden && !document.querySelector("#oidc").hidden`, 30*time.Second)
	if st := evalIn[int](tb, `fetch("v1/me").then(r => r.status)`); st != 401 {
		t.Fatalf("GET v1/me after logout: %d, want 401", st)
	}
	// v1/me answers 401 before sign-in and after logout, by design; the
	// example provider has no favicon, which Chromium asks for while its
	// form shows (a page of the provider's, not companion's).
	tb.checkClean(append(probed, "/v1/ws", prov.Issuer+"favicon.ico")...)
}
