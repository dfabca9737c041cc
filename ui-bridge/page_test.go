package uibridge

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// The page and its assets load without a token, carry the strict CSP and
// the other security headers, and hold no secret; everything under /v1/
// still needs the token; nothing else under / is served.
func TestPageServedWithoutTokenAndHeaders(t *testing.T) {
	e := newEnv(t, nil)
	assets := pageAssets()
	if _, ok := assets["/"]; !ok {
		t.Fatal("no index.html embedded")
	}
	for name, a := range assets {
		resp, body := e.do("GET", name, "", "Authorization", "")
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s without a token: %d %s", name, resp.StatusCode, body)
		}
		if string(body) != string(a.body) {
			t.Errorf("GET %s: body differs from the embedded file", name)
		}
		h := resp.Header
		if h.Get("Content-Security-Policy") != PageCSP || h.Get("X-Content-Type-Options") != "nosniff" ||
			h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: security headers %v", name, h)
		}
		if strings.Contains(string(body), e.token) {
			t.Errorf("GET %s: the asset holds the token", name)
		}
		switch {
		case strings.HasSuffix(name, ".js"):
			if ct := h.Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
				t.Errorf("GET %s: Content-Type %q", name, ct)
			}
		case name == "/":
			if ct := h.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("GET /: Content-Type %q", ct)
			}
		}
	}
	for _, path := range []string{"/v1/workspaces", "/v1/ws", "/v1/providers"} {
		resp, body := e.do("GET", path, "", "Authorization", "")
		e.expectError(resp, body, http.StatusUnauthorized, "unauthorized")
	}
	for _, path := range []string{"/index.html", "/web/app.js", "/nothing.js", "/app.js/"} {
		resp, body := e.do("GET", path, "", "Authorization", "")
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
	resp, body := e.do("POST", "/", "{}")
	e.expectError(resp, body, http.StatusMethodNotAllowed, "method_not_allowed")
	// The page is still behind the Host allowlist (DNS rebinding).
	resp, body = e.do("GET", "/", "", "Host", "evil.example:80")
	e.expectError(resp, body, http.StatusForbidden, "forbidden_host")
}

// The CSP forbids inline code, so the page must have none: no <script>
// with a body, no style attribute or element, no on… handler attribute,
// and no innerHTML, outerHTML, insertAdjacentHTML or document.write in
// the modules (data is rendered as text only).
func TestPageHasNoInlineCodeOrHTMLSinks(t *testing.T) {
	assets := pageAssets()
	html := string(assets["/"].body)
	for _, re := range []string{`<script[^>]*>[^<\s]`, `<style`, `\sstyle=`, `\son[a-z]+=`} {
		if regexp.MustCompile(re).MatchString(html) {
			t.Errorf("index.html matches %s: inline code or style is refused by the CSP", re)
		}
	}
	for name, a := range assets {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			if strings.Contains(string(a.body), sink) {
				t.Errorf("%s uses %s; render data with textContent", name, sink)
			}
		}
	}
}
