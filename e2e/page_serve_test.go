package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPageServeLoginUnderBasePath: companion serve --auth local under
// --base-path /api/companion, a user added with "companion users add"
// (password on stdin). The page opened without a token shows the login
// form (and no OpenID button: this companion offers none), a wrong
// password shows the server's own message, the right one signs in and the
// stream goes live; every asset, API call and the WebSocket went to the
// prefixed paths; logout ends the session and shows the form again.
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

	prefix := strings.TrimSuffix(p.ready.PageURL, "/")
	if bad := evalIn[[]string](tb, fmt.Sprintf(`performance.getEntriesByType("resource").map(e => e.name).filter(n => !n.startsWith(%q + "/"))`, prefix)); len(bad) != 0 {
		t.Fatalf("requests outside the base path: %v", bad)
	}
	sockets := tb.socketURLs()
	if len(sockets) == 0 || !strings.HasPrefix(sockets[len(sockets)-1], strings.Replace(prefix, "http:", "ws:", 1)+"/v1/ws") {
		t.Fatalf("WebSockets %v, want under %s", sockets, prefix)
	}

	tb.click("#logout")
	tb.waitJS("the login form again", `!document.querySelector("#login").hidden && document.querySelector("#main").hidden`, 30*time.Second)
	c := newWebClient(t, p.ready.URL)
	c.must(401, "GET", "/v1/me", nil, nil)
	// The refused password, and the probes before signing in (v1/me 401,
	// GET v1/login 405) are failed loads by design; nothing else may be.
	tb.checkClean(append(probed, "/v1/login", "/v1/ws")...)
}
