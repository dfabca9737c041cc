package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
	uibridge "github.com/canvasapp/companion/ui-bridge"
)

// probed are the routes the page feature-detects (later companions add
// them); their 404 or 405 is the expected answer here, not a failure.
var probed = []string{"/v1/me", "/retention", "/v1/providers/inspect"}

// hostileName must render as text and run nothing.
const hostileName = "<img src=x onerror=alert(1)>"

// row is the selector of a workspace's table row.
func row(id string) string { return fmt.Sprintf(`#ws-body tr[data-id=%q]`, id) }

// stateIs is a page expression: the row of id shows state.
func stateIs(id, state string) string {
	return fmt.Sprintf(`(document.querySelector(%q) || {}).textContent === %q`, row(id)+` td[data-col="state"] .badge`, state)
}

// workspaceNamed polls the API for the workspace the page created as name.
func (p *proc) workspaceNamed(name string) string {
	p.t.Helper()
	var id string
	testsupport.Poll(p.t, 30*time.Second, func() error {
		var list struct{ Workspaces []workspace }
		p.must(200, "GET", "/v1/workspaces", nil, &list)
		for _, w := range list.Workspaces {
			if w.Name == name {
				id = w.ID
				return nil
			}
		}
		return fmt.Errorf("no workspace named %q yet", name)
	})
	return id
}

// daytonaEmulator serves an emulated Daytona API for the test.
func daytonaEmulator(t *testing.T) (*daytona.Server, string) {
	dt := daytona.New(daytona.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
	srv := httptest.NewServer(dt.Handler())
	t.Cleanup(func() { dt.Close(); srv.Close() })
	return dt, srv.URL + "/api"
}

// TestPageInChromium drives the embedded page in headless Chromium against
// the binary, with Docker and an emulated Daytona behind it: it signs in
// from the URL fragment (and clears it), adds a cloud account whose token
// never shows again, creates workspaces, pauses one and watches its
// paused age tick, shows an export's progress and downloads its file,
// renders a hostile name as text, filters and sorts, asks for an explicit
// confirmation before a delete, and works from the keyboard alone; the
// page logs no error and violates no CSP rule. (The screenshots of make
// screenshot are TestPageLayout's.)
func TestPageInChromium(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	dt, apiURL := daytonaEmulator(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", image, "--docker-scope", scope}})
	if want := p.ready.URL + "/#token=" + p.ready.Token; p.ready.PageURL != want {
		t.Fatalf("ready line page_url = %q, want %q", p.ready.PageURL, want)
	}
	tb := openTab(t, p.ready.PageURL, 1600, 1100)

	// Signed in from the fragment, which left the address bar.
	tb.waitJS("the live stream", `document.querySelector("#conn").dataset.state === "live"`, 30*time.Second)
	if href := evalIn[string](tb, `location.href`); strings.Contains(href, p.ready.Token) || strings.Contains(href, "#") {
		t.Fatalf("the address bar still holds the token: %s", href)
	}

	// A cloud account from the form; its token is gone from the page after.
	tb.waitJS("providers", `document.querySelector('#a-provider option[value="daytona"]')`, 30*time.Second)
	tb.choose("#a-provider", "daytona")
	tb.typeInto("#a-label", "team cloud")
	tb.typeInto(`#a-fields input[data-config="api_url"]`, apiURL)
	tb.typeInto(`#a-fields input[data-credential="token"]`, cloudToken)
	tb.click(`#account-form button[type="submit"]`)
	tb.waitJS("the daytona account", `[...document.querySelectorAll("#accounts-table tbody tr")].some(r => r.textContent.includes("team cloud"))`, 30*time.Second)
	var accts struct {
		Accounts []struct{ ID, Provider string }
	}
	p.must(200, "GET", "/v1/accounts", nil, &accts)
	cloudAcct := ""
	for _, a := range accts.Accounts {
		if a.Provider == "daytona" {
			cloudAcct = a.ID
		}
	}
	if cloudAcct == "" {
		t.Fatalf("the account form added no daytona account: %+v", accts)
	}
	tb.waitJS("the create form knows the account", fmt.Sprintf(`document.querySelector('#c-account option[value=%q]')`, cloudAcct), 10*time.Second)

	create := func(account, name string) string {
		tb.choose("#c-account", account)
		tb.typeInto("#c-name", name)
		tb.click(`#create-form button[type="submit"]`)
		id := p.workspaceNamed(name)
		// The page clears the name once its request returns, which can be
		// after the API already lists the workspace; typing the next name
		// before that would lose it.
		tb.waitJS("the create form cleared", `document.querySelector("#c-name").value === ""`, 30*time.Second)
		return id
	}
	alpha := create("local-docker", "alpha")
	bad := create("local-docker", hostileName)
	cloud := create(cloudAcct, "cloud box")
	for _, id := range []string{alpha, bad, cloud} {
		tb.waitJS(id+" running", stateIs(id, "running"), 2*time.Minute)
	}

	// The hostile name is text: no element was made from it.
	if !evalIn[bool](tb, fmt.Sprintf(`document.querySelector(%q).textContent === %q && document.querySelectorAll("#ws-body img").length === 0`,
		row(bad)+` td[data-col="name"]`, hostileName)) {
		t.Fatalf("the hostile name was not rendered as text: %s", evalIn[string](tb, fmt.Sprintf(`document.querySelector(%q).outerHTML`, row(bad))))
	}

	// Pause from the page; the paused age ticks on its own.
	tb.click(row(alpha) + ` button[data-action="pause-resume"]`)
	tb.waitJS("alpha paused", stateIs(alpha, "paused"), time.Minute)
	age := row(alpha) + ` td[data-col="paused"]`
	first := tb.text(age)
	if !strings.HasSuffix(first, "s") {
		t.Fatalf("paused age %q, want seconds", first)
	}
	tb.waitJS("the paused age ticking", fmt.Sprintf(`document.querySelector(%q).textContent !== %q`, age, first), 10*time.Second)

	// An export shows its progress in the row, then lists its files, which download.
	ws := p.waitState(bad, "running", time.Minute)
	putBigFile(t, ws.BoxID, 64<<20)
	tb.click(row(bad) + ` button[data-action="exports"]`)
	tb.waitJS("the exports panel", `!document.querySelector("#exports").hidden`, 10*time.Second)
	evalIn[bool](tb, fmt.Sprintf(`(() => { window.__progress = [];
	  new MutationObserver(() => { const c = document.querySelector(%q);
	    if (c && c.textContent.startsWith("export: ")) window.__progress.push(c.textContent); })
	  .observe(document.querySelector("#ws-body"), {subtree: true, childList: true, characterData: true}); return true; })()`,
		row(bad)+` td[data-col="progress"]`))
	tb.click("#x-start")
	tb.waitJS("a verified export", `[...document.querySelectorAll("#exports-table tbody tr")].some(r => r.textContent.includes("verified"))`, 3*time.Minute)
	if got := evalIn[[]string](tb, `window.__progress`); len(got) == 0 {
		t.Fatal("the page never showed the export's progress")
	} else {
		t.Logf("export progress shown: %q … %q", got[0], got[len(got)-1])
	}
	downloads := t.TempDir()
	tb.allowDownloads(downloads)
	tb.click(`#exports-table button[data-file="manifest.json"]`)
	testsupport.Poll(t, 30*time.Second, func() error {
		raw, err := os.ReadFile(filepath.Join(downloads, "manifest.json"))
		if err != nil {
			return err
		}
		var m struct {
			WorkspaceID string `json:"workspace_id"`
		}
		if err := json.Unmarshal(raw, &m); err != nil || m.WorkspaceID != bad {
			return fmt.Errorf("downloaded manifest %q: %v", raw, err)
		}
		return nil
	})

	// A box made at the provider shows up as adopted.
	dt.Seed(daytona.SeedSandbox{Name: "made in the console", State: daytona.StateStopped})
	tb.waitJS("the adopted box", `[...document.querySelectorAll("#ws-body tr")].some(r => r.textContent.includes("made in the console") && r.textContent.includes("adopted"))`, time.Minute)

	// Keep, then filter and sort.
	tb.click(row(cloud) + ` button[data-action="keep"]`)
	tb.waitJS("cloud kept", fmt.Sprintf(`document.querySelector(%q).textContent === "kept"`, row(cloud)+` td[data-col="retention"]`), 30*time.Second)
	tb.waitJS("the paused state in the filter", `document.querySelector('#f-state option[value="paused"]')`, 10*time.Second)
	tb.choose("#f-state", "paused")
	// alpha, and the adopted box (stopped at the provider: paused, by someone outside).
	tb.waitJS("only paused rows", fmt.Sprintf(`(() => { const r = [...document.querySelectorAll("#ws-body tr[data-id]")];
	  return r.length === 2 && r.some(x => x.dataset.id === %q) && r.every(x => x.querySelector(".badge").textContent === "paused") &&
	    document.querySelector("#ws-totals").textContent.startsWith("2 of 4 boxes · 2 paused"); })()`, alpha), 10*time.Second)
	tb.choose("#f-state", "")
	tb.choose("#f-provider", "daytona")
	tb.waitJS("only daytona rows", `(() => { const r = [...document.querySelectorAll("#ws-body tr[data-id]")];
	  return r.length === 2 && r.every(x => x.querySelector('[data-col="provider"]').textContent === "daytona"); })()`, 10*time.Second)
	tb.choose("#f-provider", "")
	names := `[...document.querySelectorAll("#ws-body tr[data-id]")].map(r => r.querySelector('[data-col="name"]').firstChild.textContent)`
	tb.waitJS("all rows back", names+`.length === 4`, 10*time.Second)
	tb.click(`#ws-head th[data-col="name"] button`) // already by name, ascending: now descending
	tb.waitJS("sorted by name, descending", `document.querySelector('#ws-head th[data-col="name"]').getAttribute("aria-sort") === "descending" && (() => { const n = `+names+`; return n.every((x, i) => i === 0 || n[i-1].toLowerCase() >= x.toLowerCase()); })()`, 10*time.Second)
	tb.click(`#ws-head th[data-col="name"] button`)

	// Delete: the preview is shown, and nothing happens without the confirmation.
	tb.click(row(alpha) + ` button[data-action="delete"]`)
	tb.waitJS("the delete preview", `document.querySelector("#delete-dialog").open && document.querySelectorAll("#dd-lost li").length > 0 && document.querySelectorAll("#dd-survives li").length > 0`, 30*time.Second)
	if !evalIn[bool](tb, `document.querySelector("#dd-confirm").disabled && document.querySelector("#dd-name").textContent === "alpha"`) {
		t.Fatal("the delete button is enabled before the confirmation is given")
	}
	tb.click("#dd-confirm") // disabled: nothing may happen
	tb.click("#dd-cancel")
	tb.waitJS("the dialog closed", `!document.querySelector("#delete-dialog").open`, 10*time.Second)
	if got := p.stopState(alpha).State; got != "paused" {
		t.Fatalf("after a cancelled delete the workspace is %s", got)
	}

	// From the keyboard alone: create, pause, and delete with its confirmation.
	evalIn[bool](tb, `document.activeElement && document.activeElement.blur(); true`)
	tb.tabTo("#c-account", 300)
	tb.key("l") // local-docker (the first option starting with "l")
	tb.tabTo("#c-name", 5)
	tb.key("keyboard made")
	tb.key("\r")
	kbd := p.workspaceNamed("keyboard made")
	tb.waitJS("keyboard workspace running", stateIs(kbd, "running"), 2*time.Minute)
	tb.tabTo(row(kbd)+` button[data-action="pause-resume"]`, 300)
	tb.key("\r")
	tb.waitJS("keyboard workspace paused", stateIs(kbd, "paused"), time.Minute)
	tb.tabTo(row(kbd)+` button[data-action="delete"]`, 10)
	tb.key("\r")
	tb.waitJS("the delete preview, focus on the confirmation", `document.querySelector("#delete-dialog").open && document.activeElement.id === "dd-ack"`, 30*time.Second)
	tb.key(" ")
	tb.tabTo("#dd-confirm", 5)
	tb.key("\r")
	tb.waitJS("the keyboard workspace gone", fmt.Sprintf(`!document.querySelector(%q)`, row(kbd)), 2*time.Minute)

	// No secret in the document, nothing reported.
	if evalIn[bool](tb, fmt.Sprintf(`document.documentElement.outerHTML.includes(%q) || document.documentElement.outerHTML.includes(%q) || [...document.querySelectorAll("input")].some(i => i.value === %q)`,
		p.ready.Token, cloudToken, cloudToken)) {
		t.Error("a token is in the page's document")
	}
	tb.checkClean(probed...)
}

// TestPageReconnectsAfterRestart: companion stops under an open page; the
// page says it is stale and keeps trying; companion comes back on the same
// port with a new token, changes happen, and once the app hands the page
// the new token (a new #token= fragment, no reload) it resumes with
// ?since= and catches up.
func TestPageReconnectsAfterRestart(t *testing.T) {
	_, apiURL := daytonaEmulator(t)
	dataDir := t.TempDir()
	p := start(t, options{dataDir: dataDir, args: []string{"--docker-scope", "unused"}})
	var acct struct{ Account struct{ ID string } }
	p.must(201, "POST", "/v1/accounts", map[string]any{"provider": "daytona", "label": "cloud",
		"config": map[string]string{"api_url": apiURL}, "credentials": map[string]string{"token": cloudToken}}, &acct)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct.Account.ID, "name": "survivor"}, &created)
	id := created.Workspace.ID
	p.waitState(id, "running", time.Minute)

	tb := openTab(t, p.ready.PageURL, 1400, 900)
	tb.waitJS("survivor running", stateIs(id, "running"), 30*time.Second)
	evalIn[bool](tb, `window.__sameDocument = true`)

	p.stop()
	tb.waitJS("the page saying it is stale", `document.querySelector("#conn").dataset.state !== "live" && !document.querySelector("#stale").hidden && document.querySelector("#ws-table").classList.contains("stale")`, 30*time.Second)

	port := p.ready.URL[strings.LastIndex(p.ready.URL, ":")+1:]
	p = start(t, options{dataDir: dataDir, args: []string{"--docker-scope", "unused", "--listen", "127.0.0.1:" + port}})
	if p.ready.URL != "http://127.0.0.1:"+port {
		t.Fatalf("restarted on %s, want port %s", p.ready.URL, port)
	}
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", time.Minute)
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct.Account.ID, "name": "newcomer"}, &created)
	newcomer := created.Workspace.ID
	// The old token is refused: the page says so and still shows the old state.
	tb.waitJS("the page saying it is signed out", `document.querySelector("#conn").dataset.state === "signed-out"`, time.Minute)
	if !evalIn[bool](tb, stateIs(id, "running")) {
		t.Fatal("the page changed state without a connection")
	}
	// It says what helps: the new companion's page_url.
	tb.waitJS("the banner asking for the new page_url", `!document.querySelector("#lost").hidden && document.querySelector("#lost").textContent.includes("new page_url") && document.querySelector("#signedout").hidden`, 10*time.Second)

	evalIn[bool](tb, fmt.Sprintf(`location.hash = %q; true`, "token="+p.ready.Token))
	tb.waitJS("caught up", stateIs(id, "paused")+" && "+fmt.Sprintf(`!!document.querySelector(%q)`, row(newcomer)), 30*time.Second)
	tb.waitJS("live again", `document.querySelector("#conn").dataset.state === "live" && document.querySelector("#stale").hidden && document.querySelector("#lost").hidden`, 10*time.Second)
	if !evalIn[bool](tb, `window.__sameDocument === true && location.hash === ""`) {
		t.Fatal("the page reloaded, or kept the token in the address bar")
	}
	sockets := tb.socketURLs()
	if last := sockets[len(sockets)-1]; !strings.Contains(last, "/v1/ws?since=") {
		t.Fatalf("the page reconnected with %s, want ?since=", last)
	}
	for _, u := range []string{sockets[0], sockets[len(sockets)-1]} {
		if !strings.Contains(u, "snapshot=table") {
			t.Fatalf("the page connected with %s, want the table snapshot (snapshot=table)", u)
		}
	}
	// The refused attempts before the new token count as failed loads,
	// and so does an audit refresh the last change before the stop had
	// scheduled (2 s later, companion may be down); everything else must
	// be clean.
	tb.checkClean(append(probed, "/v1/accounts", "/v1/ws", "/v1/audit")...)
}

// TestPageProblemsAreCaught proves the browser tests' collector can fail:
// a page under companion's CSP with an inline script, an inline style, a
// console error, an uncaught exception, an alert and a failed load is
// reported on every count.
func TestPageProblemsAreCaught(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Security-Policy", uibridge.PageCSP)
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<!doctype html><link rel="icon" href="data:,"><p style="color:red">x</p>
<script>document.title = "inline ran"</script><script src="/bad.js"></script>`)
		case "/bad.js":
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, `console.error("boom"); fetch("/missing"); alert("hi"); setTimeout(() => { throw new Error("thrown") }, 0);`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	tb := openTab(t, srv.URL+"/", 800, 600)
	tb.waitJS("the script's work", `window.__csp && window.__csp.length >= 2`, 10*time.Second)
	var all string
	testsupport.Poll(t, 10*time.Second, func() error {
		all = strings.Join(tb.problemsOf(), "\n")
		for _, want := range []string{"CSP violation: script-src", "CSP violation: style-src", "boom", "thrown", "dialog", "failed load: " + srv.URL + "/missing"} {
			if !strings.Contains(all, want) {
				return fmt.Errorf("not reported: %s; reported:\n%s", want, all)
			}
		}
		return nil
	})
	if evalIn[string](tb, `document.title`) == "inline ran" {
		t.Fatal("the inline script ran under the page's CSP")
	}
}

// hungHandshake starts a second instance of the page's stream (stream.js)
// with a short handshake timeout, while window.WebSocket is one that never
// answers its handshake, as a proxy holding it or a network gone
// mid-connect leaves one. window.__hung records the sockets the stream
// made and closed and the states it went through.
const hungHandshake = `(async () => {
  const { Stream } = await import("./stream.js");
  const hung = window.__hung = { made: 0, closed: 0, states: [], real: window.WebSocket };
  window.WebSocket = class {
    constructor() { hung.made++; this.readyState = 0; }
    close() { hung.closed++; this.readyState = 3; setTimeout(() => this.onclose && this.onclose({ code: 1006, reason: "" })); }
  };
  hung.stream = new Stream(() => new URL("v1/ws", location.href), () => "", {
    state: (st) => hung.states.push(st), signedIn: async () => true,
    snapshot() {}, upsert() {}, remove() {}, account() {},
  }, { handshakeTimeoutMs: 200 });
  hung.stream.connect();
  return true;
})()`

// TestPageGivesUpAHungHandshake: a stream connection whose handshake is
// never answered does not leave the page "connecting…" for good: the
// stream gives up on it after its handshake timeout and tries again with
// its backoff.
func TestPageGivesUpAHungHandshake(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	tb := openTab(t, p.ready.PageURL, 1280, 800)
	tb.waitJS("the page live", `document.querySelector("#conn").dataset.state === "live"`, 30*time.Second)
	evalIn[bool](tb, hungHandshake)
	tb.waitJS("the hung handshake given up and tried again", `window.__hung.closed >= 1 && window.__hung.made >= 2`, 30*time.Second)
	evalIn[bool](tb, `(() => { const h = window.__hung; window.WebSocket = h.real; h.stream.ws = null;
	  clearTimeout(h.stream.timer); clearTimeout(h.stream.handshakeTimer); return true; })()`)
	if got := evalIn[[]string](tb, `window.__hung.states`); len(got) < 2 || got[0] != "connecting" || got[1] != "reconnecting" {
		t.Fatalf("the stream's states were %q, want connecting, then reconnecting", got)
	}
	if got := evalIn[string](tb, `document.querySelector("#conn").dataset.state`); got != "live" {
		t.Fatalf("the page's own stream is %q, want it live throughout", got)
	}
}
