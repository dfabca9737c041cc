package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
)

// TestPageServeLoginUnderBasePath: companion serve --auth local under
// --base-path /api/companion, a user added with "companion users add"
// (password on stdin). The page opened without a token shows the login
// form (and no OpenID button: this companion offers none), a wrong
// password shows the server's own message, the right one signs in and the
// stream goes live; every asset, API call and the WebSocket went to the
// prefixed paths; a sign-out in another tab closes the stream and brings
// the form back, and signing in again resumes; logout ends the session and
// shows the form again.
func TestPageServeLoginUnderBasePath(t *testing.T) {
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--base-path", "/api/companion", "--docker-scope", "unused"}})
	if !strings.HasSuffix(p.ready.PageURL, "/api/companion/") || strings.Contains(p.ready.PageURL, "#") {
		t.Fatalf("page_url %q, want the base path and no token", p.ready.PageURL)
	}
	tb := openTab(t, p.ready.PageURL, 1200, 900)
	tb.waitJS("the login form", `!document.querySelector("#login").hidden && !document.querySelector("#login-form").hidden && document.querySelector("#main").hidden`, 30*time.Second)
	if !evalIn[bool](tb, `document.querySelector("#oidc").hidden && document.activeElement.id === "l-name"`) {
		t.Fatal("the OpenID button shows without an OpenID login, or the name field has no focus")
	}

	// From the keyboard: name, Tab, password, Enter.
	tb.key("alice")
	tb.key("\t")
	tb.key("not-her-password")
	tb.key("\r")
	tb.waitJS("the server's message", `!document.querySelector("#login-error").hidden && document.querySelector("#login-error").textContent.includes("wrong user name or password")`, 30*time.Second)
	if !evalIn[bool](tb, `document.querySelector("#l-password").value === "" && document.querySelector("#main").hidden`) {
		t.Fatal("the password stayed in the form, or the page showed itself after a refused login")
	}
	tb.typeInto("#l-password", "alice-password-1")
	tb.click(`#login-form button[type="submit"]`)
	tb.waitJS("the live stream", `document.querySelector("#conn").dataset.state === "live" && document.querySelector("#login").hidden && !document.querySelector("#main").hidden`, 30*time.Second)
	tb.waitJS("who is signed in", `document.querySelector("#me").textContent.includes("alice") && !document.querySelector("#logout").hidden`, 30*time.Second)
	tb.waitJS("the accounts", `document.querySelector('#accounts-table tr[data-account="local-docker"]')`, 30*time.Second)

	// No workspace yet: the page says what to do, and its button leads there.
	tb.waitJS("the empty state", `!document.querySelector("#ws-empty").hidden && document.querySelector("#ws-filtered").hidden && document.querySelector("#ws-empty").textContent.includes("Create")`, 10*time.Second)
	tb.waitJS("an account in the create form", `document.querySelector("#c-account").value !== ""`, 10*time.Second)
	tb.click("#ws-empty-create")
	tb.waitJS("the focus on the new workspace's name", `document.activeElement.id === "c-name"`, 10*time.Second)

	prefix := strings.TrimSuffix(p.ready.PageURL, "/")
	if bad := evalIn[[]string](tb, fmt.Sprintf(`performance.getEntriesByType("resource").map(e => e.name).filter(n => !n.startsWith(%q + "/"))`, prefix)); len(bad) != 0 {
		t.Fatalf("requests outside the base path: %v", bad)
	}
	sockets := tb.socketURLs()
	if len(sockets) == 0 || !strings.HasPrefix(sockets[len(sockets)-1], strings.Replace(prefix, "http:", "ws:", 1)+"/v1/ws") {
		t.Fatalf("WebSockets %v, want under %s", sockets, prefix)
	}

	// Signed out elsewhere (another tab of the same browser): the stream
	// closes with 4012 and the page asks for a sign-in, then carries on.
	if code := evalIn[float64](tb, `fetch(new URL("v1/logout", location.href), {method: "POST"}).then((r) => r.status)`); code != 204 {
		t.Fatalf("logout from another tab: %v", code)
	}
	tb.waitJS("the login form after a sign-out elsewhere", `!document.querySelector("#login").hidden && document.querySelector("#main").hidden && document.querySelector("#signedout").hidden && document.querySelector("#me").hidden`, 30*time.Second)
	evalIn[bool](tb, `document.querySelector("#l-name").value = ""; true`)
	tb.typeInto("#l-name", "alice")
	tb.typeInto("#l-password", "alice-password-1")
	tb.click(`#login-form button[type="submit"]`)
	tb.waitJS("live again, signed in", `document.querySelector("#conn").dataset.state === "live" && !document.querySelector("#me").hidden && document.querySelector('#accounts-table tr[data-account="local-docker"]')`, 30*time.Second)

	tb.click("#logout")
	tb.waitJS("the login form again", `!document.querySelector("#login").hidden && document.querySelector("#main").hidden`, 30*time.Second)
	c := newWebClient(t, p.ready.URL)
	c.must(401, "GET", "/v1/me", nil, nil)
	// The refused password, and the probes before signing in (v1/me 401,
	// GET v1/login 405) are failed loads by design; nothing else may be.
	tb.checkClean(append(probed, "/v1/login", "/v1/ws")...)
}

// TestPageServeOpenIDButton: the page's reading of GET {base}/v1/login in
// the cases a real provider does not easily produce. Chromium answers that
// one GET; everything else is the real companion serve. (The real sign-in
// through an OpenID provider, with both methods, is
// TestPageServeOpenIDSignIn.) With only "oidc" the password form is gone
// and the OpenID button has the focus; an oidc_url on another site is not
// linked. With no method the page can use (that one, or only an ingress
// signing people in) it shows the signed-out banner, not an empty section.
func TestPageServeOpenIDButton(t *testing.T) {
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--base-path", "/api/companion", "--docker-scope", "unused"}})
	prefix := strings.TrimSuffix(p.ready.PageURL, "/")

	var mu sync.Mutex
	answer := ""
	tb := openTab(t, "about:blank", 1200, 900)
	if err := chromedp.Listen(tb.ctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		mu.Lock()
		body := answer
		mu.Unlock()
		go func() {
			if e.Request.Method == "GET" && e.Request.URL == prefix+"/v1/login" {
				chromedp.Call(tb.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: e.RequestID, ResponseCode: 200,
					ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}, {Name: "Cache-Control", Value: "no-store"}},
					Body:            []byte(body)})
				return
			}
			chromedp.Call(tb.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
		}()
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if _, err := chromedp.Call(tb.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/v1/login"}}}); err != nil {
		t.Fatalf("chromium: intercept v1/login: %v", err)
	}
	navigate := func(methods string) {
		t.Helper()
		mu.Lock()
		answer = methods
		mu.Unlock()
		if err := chromedp.Do(tb.timeout(30*time.Second), chromedp.Navigate(p.ready.PageURL)); err != nil {
			t.Fatal(err)
		}
	}
	open := func(methods string) {
		t.Helper()
		navigate(methods)
		tb.waitJS("the sign-in section", `!document.querySelector("#login").hidden`, 30*time.Second)
	}
	// Nothing the page can sign in with: no empty sign-in section, the
	// signed-out banner instead.
	noSignIn := func(methods, banner string) {
		t.Helper()
		navigate(methods)
		tb.waitJS("the signed-out banner", `!document.querySelector("#signedout").hidden && document.querySelector("#signedout").textContent.includes(`+strconv.Quote(banner)+`)`, 30*time.Second)
		if !evalIn[bool](tb, `document.querySelector("#login").hidden`) {
			t.Fatalf("methods %s: an empty sign-in section shows", methods)
		}
	}

	open(fmt.Sprintf(`{"methods":["oidc"],"oidc_url":%q}`, prefix+"/v1/login/oidc"))
	if !evalIn[bool](tb, `document.querySelector("#login-form").hidden && !document.querySelector("#oidc").hidden && document.activeElement.id === "oidc"`) {
		t.Fatal("OpenID only: the password form shows, or the button is missing or not focused")
	}
	noSignIn(`{"methods":["oidc"],"oidc_url":"https://elsewhere.example/login"}`, "Not signed in")
	if !evalIn[bool](tb, `document.querySelector("#oidc").hidden`) {
		t.Fatal("the page links a sign-in on another site")
	}
	noSignIn(`{"methods":["proxy"]}`, "Reload the page to sign in again")
	// With nothing to sign in with, the page tries the stream and learns it
	// is signed out (v1/ws, v1/accounts 401): failed loads by design.
	tb.checkClean("/v1/me", "/v1/ws", "/v1/accounts")
}
