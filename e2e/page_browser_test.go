package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/apicontract"
)

// tab is companion's page open in headless Chromium, with everything the
// page reports collected: console errors and warnings, uncaught
// exceptions, CSP violations, JavaScript dialogs (alert, confirm: an
// injected script would open one), failed loads, and the URLs of the
// WebSockets it opened.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // anything that must not happen
	failed   []string // failed loads: "URL status text"
	sockets  []string // WebSocket URLs, in order
	// pending are the page's requests and WebSocket handshakes not
	// answered yet, by request id: what a page that seems stuck waits on.
	pending map[network.RequestID]pendingLoad
}

type pendingLoad struct {
	what  string
	since time.Time
}

// cspWatch records CSP violations from the page's own document, before any
// of its scripts run.
const cspWatch = `window.__csp = []; document.addEventListener("securitypolicyviolation",
  e => window.__csp.push(e.violatedDirective + " " + e.blockedURI + " " + e.sourceFile + ":" + e.lineNumber));`

// openTab starts Chromium and opens url (no timeout on the first run:
// it owns the browser; see chromedp.Run).
func openTab(t *testing.T, url string, width, height int) *tab {
	t.Helper()
	opts := chromiumOptions(t, chromedp.WindowSize(width, height))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	tb := &tab{t: t, ctx: ctx, pending: map[network.RequestID]pendingLoad{}}
	if err := chromedp.Listen(ctx, tb.event); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: cspWatch}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if err := chromedp.Do(tb.timeout(30*time.Second), chromedp.Navigate(url)); err != nil {
		t.Fatalf("chromium: open %s: %v", url, err)
	}
	tb.settle()
	return tb
}

// pageStarted holds once companion's page has started: its stream was
// answered (live, or refused) or it asks for a sign-in. Other pages have
// no #conn and hold at once.
const pageStarted = `(() => { const c = document.querySelector("#conn"), l = document.querySelector("#login");
  return c === null || c.dataset.state !== "connecting" || (l !== null && !l.hidden); })()`

// settle waits for the page to start. A first load through the contract
// proxy has, rarely and only in full runs, waited on something for over
// 30 s (not yet understood): it is logged with what it waited on, and the
// page is loaded once more.
func (tb *tab) settle() {
	tb.t.Helper()
	errNotYet := errors.New("not started")
	err := testsupport.PollErr(20*time.Second, func() error {
		if ok, err := chromedp.Run(tb.timeout(10*time.Second), chromedp.Evaluate[bool](pageStarted)); err != nil || !ok {
			return errNotYet
		}
		return nil
	})
	if err == nil {
		return
	}
	tb.t.Logf("the page had not started after 20 s; waiting on: %s; loading it again", tb.waitingOn())
	if err := chromedp.Do(tb.timeout(30*time.Second), chromedp.Reload()); err != nil {
		tb.t.Fatalf("chromium: reload: %v", err)
	}
}

// event runs on chromedp's reading goroutine: record and return.
func (tb *tab) event(ev any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			tb.problems = append(tb.problems, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(parts, " ")))
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		tb.problems = append(tb.problems, "exception: "+msg)
	case *cdplog.EventEntryAdded:
		if e.Entry.Level != cdplog.EntryLevelError && e.Entry.Level != cdplog.EntryLevelWarning {
			return
		}
		if e.Entry.Source == cdplog.EntrySourceNetwork {
			tb.failed = append(tb.failed, e.Entry.URL+" "+e.Entry.Text)
			return
		}
		tb.problems = append(tb.problems, fmt.Sprintf("log %s/%s: %s %s", e.Entry.Source, e.Entry.Level, e.Entry.Text, e.Entry.URL))
	case *cdppage.EventJavascriptDialogOpening:
		tb.problems = append(tb.problems, "a JavaScript dialog opened: "+e.Message)
		go chromedp.Call(tb.ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: false})
	case *network.EventWebSocketCreated:
		tb.sockets = append(tb.sockets, e.URL)
		tb.pending[e.RequestID] = pendingLoad{"WebSocket " + e.URL, time.Now()}
	case *network.EventRequestWillBeSent:
		tb.pending[e.RequestID] = pendingLoad{e.Request.Method + " " + e.Request.URL, time.Now()}
	case *network.EventLoadingFinished:
		delete(tb.pending, e.RequestID)
	case *network.EventLoadingFailed:
		delete(tb.pending, e.RequestID)
	case *network.EventWebSocketHandshakeResponseReceived:
		delete(tb.pending, e.RequestID)
	case *network.EventWebSocketClosed:
		delete(tb.pending, e.RequestID)
	}
}

func (tb *tab) timeout(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(tb.ctx, d)
	tb.t.Cleanup(cancel)
	return ctx
}

// eval evaluates js in the page and returns its value.
func evalIn[T any](tb *tab, js string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.timeout(30*time.Second), chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("chromium: evaluate %s: %v", js, err)
	}
	return v
}

// waitJS polls js (an expression) until it is true.
func (tb *tab) waitJS(what, js string, timeout time.Duration) {
	tb.t.Helper()
	testsupport.Poll(tb.t, timeout, func() error {
		ok, err := chromedp.Run(tb.timeout(10*time.Second), chromedp.Evaluate[bool]("!!("+js+")"))
		if err != nil {
			return fmt.Errorf("%s: %v", what, err)
		}
		if !ok {
			return fmt.Errorf("page does not show %s yet; connection: %s; totals: %s; waiting on: %s", what, tb.text("#conn"), tb.text("#ws-totals"), tb.waitingOn())
		}
		return nil
	})
}

// waitingOn lists the page's requests and handshakes that have waited
// more than a second for an answer.
func (tb *tab) waitingOn() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, p := range tb.pending {
		if age := time.Since(p.since); age > time.Second {
			out = append(out, fmt.Sprintf("%s (%s)", p.what, age.Round(time.Second)))
		}
	}
	if len(out) == 0 {
		out = append(out, "nothing")
	}
	proxy := []string{"nothing"}
	if bp, ok := browserProxies.Load(tb.t); ok {
		if w := bp.(*apicontract.BrowserProxy).Waiting(); len(w) > 0 {
			proxy = w
		}
	}
	return strings.Join(out, ", ") + "; the contract proxy is still serving: " + strings.Join(proxy, ", ")
}

// text is the textContent of the first element matching sel ("" when none).
func (tb *tab) text(sel string) string {
	v, _ := chromedp.Run(tb.timeout(10*time.Second), chromedp.Evaluate[string](
		fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)))
	return v
}

// click clicks the element matching sel with the mouse.
func (tb *tab) click(sel string) {
	tb.t.Helper()
	if err := chromedp.Do(tb.timeout(30*time.Second), chromedp.Click(chromedp.CSS(sel))); err != nil {
		tb.t.Fatalf("chromium: click %s: %v", sel, err)
	}
}

// typeInto focuses sel and types s with key events.
func (tb *tab) typeInto(sel, s string) {
	tb.t.Helper()
	if err := chromedp.Do(tb.timeout(30*time.Second), chromedp.SendKeys(chromedp.CSS(sel), s)); err != nil {
		tb.t.Fatalf("chromium: type into %s: %v", sel, err)
	}
}

// choose selects value in the <select> sel, as a person picking it does
// (a change event follows).
func (tb *tab) choose(sel, value string) {
	tb.t.Helper()
	ok := evalIn[bool](tb, fmt.Sprintf(`(() => { const s = document.querySelector(%q);
	  if (![...s.options].some(o => o.value === %q)) return false;
	  s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, sel, value, value))
	if !ok {
		tb.t.Fatalf("%s has no option %q", sel, value)
	}
}

// key sends one key (chromedp/kb names: "\t" Tab, "\r" Enter, " " Space).
func (tb *tab) key(k string, opts ...chromedp.KeyOption) {
	tb.t.Helper()
	if err := chromedp.Do(tb.timeout(10*time.Second), chromedp.KeyEvent(k, opts...)); err != nil {
		tb.t.Fatalf("chromium: key %q: %v", k, err)
	}
}

// tabTo presses Tab until the focused element matches sel, and fails
// after limit presses: it proves sel is reachable from the keyboard.
func (tb *tab) tabTo(sel string, limit int) {
	tb.t.Helper()
	for range limit {
		if evalIn[bool](tb, fmt.Sprintf(`!!document.activeElement && document.activeElement.matches(%q)`, sel)) {
			return
		}
		tb.key("\t")
	}
	tb.t.Fatalf("%s not reached with %d Tab presses; focus is on %s", sel, limit,
		evalIn[string](tb, `document.activeElement ? document.activeElement.outerHTML.slice(0, 200) : "nothing"`))
}

// allowDownloads saves downloads into dir under their own names.
func (tb *tab) allowDownloads(dir string) {
	tb.t.Helper()
	if _, err := chromedp.CallBrowser(tb.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir}); err != nil {
		tb.t.Fatalf("chromium: allow downloads: %v", err)
	}
}

// checkClean fails the test on any problem the page reported, and on a
// failed load other than allowed (substrings of the URL: the page probes
// routes a later companion adds, and a 404 there is expected).
func (tb *tab) checkClean(allowed ...string) {
	tb.t.Helper()
	for _, p := range tb.problemsOf(allowed...) {
		tb.t.Error(p)
	}
}

// problemsOf lists what the page reported, as checkClean judges it.
func (tb *tab) problemsOf(allowed ...string) []string {
	tb.t.Helper()
	csp := evalIn[[]string](tb, `window.__csp || ["the CSP watch did not run"]`)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, v := range csp {
		out = append(out, "CSP violation: "+v)
	}
	for _, p := range tb.problems {
		out = append(out, "page problem: "+p)
	}
next:
	for _, f := range tb.failed {
		for _, a := range allowed {
			if strings.Contains(f, a) {
				continue next
			}
		}
		out = append(out, "failed load: "+f)
	}
	return out
}

func (tb *tab) socketURLs() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.sockets...)
}
