package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// crossSiteJS runs in a page: a credentialed write (making an API token)
// and a WebSocket to companion at base, reporting what the page saw.
const crossSiteJS = `(async (base) => {
  const out = {};
  try {
    const r = await fetch(base + "/v1/tokens", {method: "POST", credentials: "include",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify({label: "from " + location.origin})});
    out.http = r.status;
  } catch (e) { out.http = "blocked"; }
  out.ws = await new Promise(res => {
    const ws = new WebSocket(base.replace("http:", "ws:") + "/v1/ws", ["companion.v1"]);
    const timer = setTimeout(() => res("timeout"), 10000);
    ws.onmessage = e => { clearTimeout(timer); res(JSON.parse(e.data).type); ws.close(); };
    ws.onerror = () => { clearTimeout(timer); res("refused"); };
  });
  return out;
})(%q)`

// TestServeBrowserCrossSite signs in with headless Chromium, so the
// browser holds a real session cookie, then runs the same write and
// WebSocket from companion's own origin (both work) and from a page on
// another site (both refused, and no token was made).
func TestServeBrowserCrossSite(t *testing.T) {
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>elsewhere</title>`))
	}))
	defer evil.Close()
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1) // another site than 127.0.0.1

	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--docker-scope", "unused"}})

	actx, cancel := chromedp.NewExecAllocator(context.Background(), chromiumOptions(t)...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	// Sign in from companion's own origin; the cookie is HttpOnly, so the
	// page cannot read it, only the browser sends it.
	if err := chromedp.Do(ctx, chromedp.Navigate(p.ready.URL+"/healthz")); err != nil {
		t.Fatal(err)
	}
	login, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`fetch("/v1/login", {method: "POST", headers: {"Content-Type": "application/json"},
		body: JSON.stringify({name: "alice", password: "alice-password-1"})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || login != 200 {
		t.Fatalf("browser sign-in: %v, status %v", err, login)
	}
	same, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](fmt.Sprintf(crossSiteJS, p.ready.URL), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if same["http"] != float64(201) || same["ws"] != "snapshot" {
		t.Fatalf("same origin with the session cookie: %v, want a token made and a snapshot", same)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(evilURL+"/")); err != nil {
		t.Fatal(err)
	}
	cross, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](fmt.Sprintf(crossSiteJS, p.ready.URL), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if cross["http"] == float64(201) || cross["ws"] != "refused" {
		t.Fatalf("cross-site page with the browser's session cookie: %v, want both refused", cross)
	}
	// Whatever the page saw, no token was made for it.
	if err := chromedp.Do(ctx, chromedp.Navigate(p.ready.URL+"/healthz")); err != nil {
		t.Fatal(err)
	}
	tokens, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch("/v1/tokens").then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tokens, "from "+evilURL) || !strings.Contains(tokens, "from "+p.ready.URL) {
		t.Fatalf("tokens after the probes: %s", tokens)
	}
}
