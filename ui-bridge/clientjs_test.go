package uibridge

import (
	"bytes"
	"testing"
)

// TestClientJSServed: the embedded client is served without a token, as
// JavaScript, revalidated by its ETag; the gate still guards its Host and
// Origin, and it is read-only.
func TestClientJSServed(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AllowedOrigins = []string{"app://canvas"} })
	resp, body := e.do("GET", "/client/companion.js", "", "Authorization", "")
	if resp.StatusCode != 200 || !bytes.Equal(body, clientJS) || len(body) == 0 {
		t.Fatalf("GET /client/companion.js: %d, %d bytes", resp.StatusCode, len(body))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	if !bytes.Contains(body, []byte("export class CompanionClient")) {
		t.Fatal("the served file is not the client")
	}
	etag := resp.Header.Get("ETag")
	if resp, _ := e.do("GET", "/client/companion.js", "", "If-None-Match", etag); resp.StatusCode != 304 {
		t.Fatalf("If-None-Match with its ETag: %d, want 304", resp.StatusCode)
	}
	// An allowed app origin may import it (CORS); another may not.
	resp, _ = e.do("GET", "/client/companion.js", "", "Origin", "app://canvas")
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "app://canvas" {
		t.Fatalf("from the app's origin: %d, ACAO %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	resp, body = e.do("GET", "/client/companion.js", "", "Origin", "https://evil.example")
	e.expectError(resp, body, 403, "forbidden_origin")
	resp, body = e.do("GET", "/client/companion.js", "", "Host", "evil.example")
	e.expectError(resp, body, 403, "forbidden_host")
	resp, body = e.do("POST", "/client/companion.js", "{}")
	e.expectError(resp, body, 405, "method_not_allowed")
}
