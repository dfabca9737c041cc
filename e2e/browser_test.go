package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// probePage is served from a test origin. It calls companion the way a
// browser front end must: the token in the Authorization header for HTTP,
// and as the companion.bearer.<token> subprotocol for the WebSocket.
const probePage = `<!doctype html><meta charset="utf-8"><title>probe</title>
<script>
async function probe(url, token) {
  const out = {};
  try {
    const r = await fetch(url + "/v1/workspaces", {headers: {"Authorization": "Bearer " + token}});
    out.http = r.status;
  } catch (e) { out.http = "blocked"; }
  out.ws = await new Promise(res => {
    const protos = token ? ["companion.v1", "companion.bearer." + token] : ["companion.v1"];
    const ws = new WebSocket(url.replace("http:", "ws:") + "/v1/ws", protos);
    const timer = setTimeout(() => res("timeout"), 10000);
    ws.onmessage = e => { clearTimeout(timer); res(JSON.parse(e.data).type + ":" + ws.protocol); ws.close(); };
    ws.onerror = () => { clearTimeout(timer); res("refused"); };
  });
  return out;
}
</script>`

func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	t.Fatal("headless Chromium is required (apt-get install chromium; make test installs it)")
	return ""
}

// browserProxies are the contract proxies of the running browser tests,
// by test: a test that waits in vain reports what its proxy still serves.
var browserProxies sync.Map // *testing.T → *apicontract.BrowserProxy

// chromiumOptions are how the e2e tests start headless Chromium: a fresh
// profile in t's temp dir, no sandbox or GPU, and no background traffic
// (QUIC, updates, sync) that a test would see as stray requests; extra
// options are added after these.
func chromiumOptions(t *testing.T, extra ...chromedp.ExecAllocatorOption) []chromedp.ExecAllocatorOption {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
	)
	// The page's requests to companion go through the API contract's
	// checker, as a Go client's do; loopback is proxied too (Chromium
	// bypasses the proxy for it unless told).
	bp, err := contract.NewBrowserProxy()
	if err != nil {
		t.Fatalf("the API contract's browser proxy: %v", err)
	}
	t.Cleanup(func() { bp.Close(); browserProxies.Delete(t) })
	browserProxies.Store(t, bp)
	opts = append(opts, chromedp.ProxyServer("http://"+bp.Addr), chromedp.Flag("proxy-bypass-list", "<-loopback>"))
	// COMPANION_NETLOG_DIR keeps each browser's net log there, to see
	// what a page waited on when a browser test failed.
	if d := os.Getenv("COMPANION_NETLOG_DIR"); d != "" {
		f, _ := os.CreateTemp(d, strings.ReplaceAll(t.Name(), "/", "_")+"-*.json")
		f.Close()
		opts = append(opts, chromedp.Flag("log-net-log", f.Name()), chromedp.Flag("net-log-capture-mode", "Everything"))
	}
	return append(opts, extra...)
}

// browserProbe loads the probe page from origin in headless Chromium and
// runs it against companion.
func browserProbe(t *testing.T, origin, url, token string) map[string]any {
	t.Helper()
	opts := chromiumOptions(t)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(origin+"/")); err != nil {
		t.Fatalf("chromium: load probe page: %v", err)
	}
	res, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](fmt.Sprintf("probe(%q, %q)", url, token), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("chromium: run probe: %v", err)
	}
	return res
}

// TestBrowserGate runs the desktop gate against a real browser: a page from
// the allowed (Electron-like) origin can use the API and the stream with
// the token; a page from any other origin, or without the token, cannot
// (cross-site WebSocket hijacking and CSRF are refused).
func TestBrowserGate(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(probePage))
	})
	allowed := httptest.NewServer(page)
	defer allowed.Close()
	foreign := httptest.NewServer(page)
	defer foreign.Close()

	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused", "--allow-origin", allowed.URL}})

	got := browserProbe(t, allowed.URL, p.ready.URL, p.ready.Token)
	if got["http"] != float64(200) || got["ws"] != "snapshot:companion.v1" {
		t.Fatalf("allowed origin with the token: %v", got)
	}
	got = browserProbe(t, allowed.URL, p.ready.URL, "")
	if got["http"] == float64(200) || got["ws"] != "refused" {
		t.Fatalf("allowed origin without the token: %v", got)
	}
	got = browserProbe(t, foreign.URL, p.ready.URL, p.ready.Token)
	if got["http"] == float64(200) || got["ws"] != "refused" {
		t.Fatalf("foreign origin (even holding the token): %v", got)
	}
}
