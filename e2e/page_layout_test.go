package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/emulation"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
)

// longName is a workspace name with no place to break: it must truncate
// (full text on hover), not widen the table.
const longName = "a-workspace-whose-name-goes-on-and-on-without-any-space-0123456789abcdef0123456789abcdef"

// interactiveRoles are the accessibility roles of controls a person acts
// on; each must have a name a screen reader can say.
var interactiveRoles = map[string]bool{
	"button": true, "link": true, "textbox": true, "searchbox": true, "combobox": true, "listbox": true,
	"checkbox": true, "radio": true, "spinbutton": true, "slider": true, "switch": true, "menuitem": true,
	"menuitemcheckbox": true, "menuitemradio": true, "tab": true, "option": true, "menulistoption": true,
	"popupbutton": true, "togglebutton": true,
}

// unnamedControls reads Chromium's accessibility tree (the DevTools
// protocol's Accessibility.getFullAXTree) and lists every control that is
// exposed (not ignored) and has an empty accessible name.
func (tb *tab) unnamedControls() []string {
	tb.t.Helper()
	nodes, err := chromedp.Call(tb.timeout(30*time.Second), accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		tb.t.Fatalf("chromium: accessibility tree: %v", err)
	}
	var out []string
	controls := 0
	for _, n := range nodes.Nodes {
		if n.Ignored || n.Role == nil {
			continue
		}
		role := strings.ToLower(strings.Trim(string(n.Role.Value), `"`))
		if !interactiveRoles[role] {
			continue
		}
		controls++
		name := ""
		if n.Name != nil {
			name = strings.TrimSpace(strings.Trim(string(n.Name.Value), `"`))
		}
		if name == "" {
			out = append(out, fmt.Sprintf("%s (DOM node %d) has no accessible name", role, n.BackendDOMNodeID))
		}
	}
	if controls == 0 {
		out = append(out, "the accessibility tree lists no control at all")
	}
	return out
}

// viewport sets the page's viewport (mobile: a phone's, with touch and the
// meta viewport honoured).
func (tb *tab) viewport(width, height int, mobile bool) {
	tb.t.Helper()
	if _, err := chromedp.Call(tb.timeout(10*time.Second), emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
		Width: int64(width), Height: int64(height), DeviceScaleFactor: 1, Mobile: mobile}); err != nil {
		tb.t.Fatalf("chromium: viewport %dx%d: %v", width, height, err)
	}
	tb.waitJS(fmt.Sprintf("a %d px wide viewport", width), fmt.Sprintf(`document.documentElement.clientWidth === %d`, width), 10*time.Second)
}

// viewportPNG is a screenshot of what is in sight (the viewport only).
func (tb *tab) viewportPNG() []byte {
	tb.t.Helper()
	png, err := chromedp.Call(tb.timeout(30*time.Second), cdppage.CaptureScreenshot, cdppage.CaptureScreenshotParams{Format: cdppage.CaptureScreenshotFormatPng})
	if err != nil {
		tb.t.Fatalf("chromium: screenshot: %v", err)
	}
	return png.Data
}

// overflowJS lists what scrolls sideways: the document, or any element
// that scrolls (overflow auto or scroll) and holds more than its width.
// Cells that truncate (overflow hidden, an ellipsis) are not scrolling.
const overflowJS = `(() => {
  const out = [];
  const d = document.documentElement;
  if (d.scrollWidth > d.clientWidth) {
    // Name the innermost elements that reach past the right edge.
    const clipped = e => { for (let p = e.parentElement; p; p = p.parentElement) if (getComputedStyle(p).overflowX !== "visible") return true; return false; };
    const past = [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > d.clientWidth + 1 && !clipped(e) &&
      ![...e.children].some(c => c.getBoundingClientRect().right > d.clientWidth + 1));
    out.push("document: " + d.scrollWidth + " > " + d.clientWidth + ", past the edge: " +
      past.slice(0, 5).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + "." + e.className + " " + Math.round(e.getBoundingClientRect().right)).join(", "));
  }
  for (const e of document.querySelectorAll("body *")) {
    const s = getComputedStyle(e);
    if (!["auto", "scroll"].includes(s.overflowX) || e.scrollWidth <= e.clientWidth + 1) continue;
    out.push((e.id ? "#" + e.id : e.tagName.toLowerCase()) + ": " + e.scrollWidth + " > " + e.clientWidth);
  }
  return out; })()`

// TestPageLayout: companion's page with several workspaces, one of them
// paused and some with long names, at a laptop's 1280×800 and a phone's
// 390×844. At both sizes nothing scrolls sideways, every control has an
// accessible name, and a row's actions are reachable: at 1280 the
// secondary ones are behind the row's menu, at 390 rows are cards with the
// same menu. The page's words: "paused by companion", the audit list
// names the workspace, the account form links the provider's
// documentation, the sized count leaves out unknown and 0 sizes. With
// COMPANION_PAGE_SCREENSHOT (and COMPANION_PAGE_SCREENSHOT_NARROW) set it
// writes the two screenshots (make screenshot).
func TestPageLayout(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	dt, apiURL := daytonaEmulator(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", image, "--docker-scope", scope}})
	var acct struct{ Account struct{ ID string } }
	p.must(201, "POST", "/v1/accounts", map[string]any{"provider": "daytona", "label": "team cloud (eu-central, shared with the whole platform team)",
		"config": map[string]string{"api_url": apiURL}, "credentials": map[string]string{"token": cloudToken}}, &acct)
	create := func(account, name string) string {
		var created struct{ Workspace workspace }
		p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": account, "name": name}, &created)
		return created.Workspace.ID
	}
	alpha := create("local-docker", "alpha")
	long := create("local-docker", longName)
	api := create("local-docker", "api-server")
	cloud := create(acct.Account.ID, "cloud box")
	create(acct.Account.ID, "cloud "+longName)
	dt.Seed(daytona.SeedSandbox{Name: "made in the console", State: daytona.StateStopped})
	for _, id := range []string{alpha, long, api} {
		p.waitState(id, "running", 2*time.Minute)
	}
	putBigFile(t, p.waitState(api, "running", time.Minute).BoxID, 48<<20)
	p.must(202, "POST", "/v1/workspaces/"+alpha+"/pause", nil, nil)
	p.waitState(alpha, "paused", time.Minute)

	tb := openTab(t, p.ready.PageURL, 1280, 800)
	tb.viewport(1280, 800, false)
	tb.waitJS("six rows, alpha paused", `document.querySelectorAll("#ws-body tr[data-id]").length === 6 && `+stateIs(alpha, "paused"), time.Minute)
	tb.waitJS("the audit list", `document.querySelector('#audit-table tr[data-action="pause"]')`, 30*time.Second)

	// The words.
	if got := evalIn[string](tb, fmt.Sprintf(`document.querySelector(%q).title`, row(alpha)+` td[data-col="state"]`)); got != "paused by companion" {
		t.Errorf("alpha's state reads %q, want paused by companion", got)
	}
	if got := tb.text(`#audit-table tr[data-action="pause"] td.subject`); !strings.HasPrefix(got, "alpha") {
		t.Errorf("the audit list names the paused workspace %q, want its name first", got)
	}
	if got := tb.text(`#audit-table tr[data-action="account_add"] td.subject`); !strings.HasPrefix(got, "team cloud") {
		t.Errorf("the audit list names the added account %q, want its label first", got)
	}
	tb.choose("#a-provider", "daytona")
	if href := evalIn[string](tb, `document.querySelector("#a-docs").hidden ? "" : document.querySelector("#a-docs-link").href`); !strings.Contains(href, "daytona.io") {
		t.Errorf("the account form links %q for Daytona, want its documentation", href)
	}
	// Each of Daytona's settings shows its help, as GET /v1/providers
	// carries it: the description under the field (tied to it by
	// aria-describedby), the example as its placeholder.
	var provs struct {
		Providers []struct {
			Name   string
			Config []struct{ Name, Description, Example string }
		}
	}
	p.must(200, "GET", "/v1/providers", nil, &provs)
	helped := 0
	for _, pr := range provs.Providers {
		if pr.Name != "daytona" {
			continue
		}
		for _, c := range pr.Config {
			if c.Description == "" || c.Example == "" {
				t.Errorf("GET /v1/providers: daytona's %s has description %q, example %q", c.Name, c.Description, c.Example)
			}
			got := evalIn[[]string](tb, fmt.Sprintf(`(() => { const i = document.querySelector('#a-fields input[data-config=%q]');
			  const h = i && document.getElementById(i.getAttribute("aria-describedby") || "");
			  return i ? [i.placeholder, h ? h.textContent : "", h && !h.hidden && h.offsetHeight > 0 ? "shown" : "not shown"] : []; })()`, c.Name))
			if want := []string{"e.g. " + c.Example, c.Description, "shown"}; !slices.Equal(got, want) {
				t.Errorf("the account form shows daytona's %s as %q, want %q", c.Name, got, want)
			}
			helped++
		}
	}
	if helped < 5 {
		t.Errorf("the account form showed help for %d of Daytona's settings, want all 5", helped)
	}
	// Sized: only workspaces with a size above 0 count.
	var list struct{ Workspaces []map[string]any }
	tb.waitJS("a measured size", `document.querySelector("#ws-totals").textContent.match(/\((\d+) sized\)/) && +document.querySelector("#ws-totals").textContent.match(/\((\d+) sized\)/)[1] > 0`, 2*time.Minute)
	p.must(200, "GET", "/v1/workspaces", nil, &list)
	sized := 0
	for _, w := range list.Workspaces {
		if n, ok := w["size_bytes"].(float64); ok && n > 0 {
			sized++
		}
	}
	if got := tb.text("#ws-totals"); !strings.Contains(got, fmt.Sprintf("(%d sized)", sized)) {
		t.Errorf("totals %q, want (%d sized): the API lists %d workspaces with a size above 0", got, sized, sized)
	}
	if !evalIn[bool](tb, `import("./table.js").then(m => !m.sized({size_bytes: 0}) && !m.sized({}) && m.sized({size_bytes: 1}))`) {
		t.Error("a size of 0 or none counts as sized")
	}

	// Size bars: the largest workspace's is full, a smaller one's is shorter.
	fill := func(id string) string {
		return evalIn[string](tb, fmt.Sprintf(`document.querySelector(%q).style.width`, row(id)+` td[data-col="size"] .bar > span`))
	}
	if big, small := fill(cloud), fill(api); big != "100%" || small == "" || small == "100%" {
		t.Errorf("size bars: the largest (cloud box) %q, api-server %q; want 100%% and less", big, small)
	}

	// A filter that matches nothing says so and offers the way back.
	tb.typeInto("#f-name", "no such workspace")
	tb.waitJS("the no-match state", `!document.querySelector("#ws-filtered").hidden && document.querySelector("#ws-empty").hidden && !document.querySelector("#ws-body tr[data-id]")`, 10*time.Second)
	tb.click("#f-clear")
	tb.waitJS("every row back", `document.querySelector("#ws-filtered").hidden && document.querySelectorAll("#ws-body tr[data-id]").length === 6 && document.querySelector("#f-name").value === ""`, 10*time.Second)

	// 1280×800: nothing scrolls sideways; long names truncate, whole on hover.
	if got := evalIn[[]string](tb, overflowJS); len(got) > 0 {
		t.Errorf("at 1280 px, sideways scrolling: %v", got)
	}
	if !evalIn[bool](tb, fmt.Sprintf(`(() => { const c = document.querySelector(%q); return c.title === %q && c.scrollWidth > c.clientWidth; })()`,
		row(long)+` td[data-col="name"]`, longName)) {
		t.Error("the long name is neither truncated nor whole in its title")
	}
	for _, p := range tb.unnamedControls() {
		t.Errorf("at 1280 px: %s", p)
	}
	// The secondary actions are in the row's menu; Delete… is reached through it.
	del := row(api) + ` button[data-action="delete"]`
	visible := func(sel string) bool {
		return evalIn[bool](tb, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.getClientRects().length > 0; })()`, sel))
	}
	if visible(del) || !visible(row(api)+` button[data-action="pause-resume"]`) {
		t.Fatal("at 1280 px, Delete… is not in the menu, or Pause is not in sight")
	}
	// From the keyboard: Enter opens the menu on its first action, Escape
	// closes it and gives the focus back.
	toggle := row(api) + ` button[data-action="menu"]`
	evalIn[bool](tb, fmt.Sprintf(`document.querySelector(%q).focus(); true`, toggle))
	tb.key("\r")
	tb.waitJS("the menu open on Keep", fmt.Sprintf(`document.activeElement === document.querySelector(%q)`, row(api)+` button[data-action="keep"]`), 10*time.Second)
	tb.key(kb.Escape)
	tb.waitJS("the menu closed, focus on its button", fmt.Sprintf(`document.activeElement === document.querySelector(%q) && document.activeElement.getAttribute("aria-expanded") === "false" && !document.querySelector(%q).getClientRects().length`, toggle, del), 10*time.Second)
	tb.click(row(api) + ` button[data-action="menu"]`)
	tb.waitJS("the row menu open", fmt.Sprintf(`document.querySelector(%q).getAttribute("aria-expanded") === "true"`, row(api)+` button[data-action="menu"]`), 10*time.Second)
	if got := evalIn[[]string](tb, overflowJS); len(got) > 0 {
		t.Errorf("at 1280 px with a row menu open, sideways scrolling: %v", got)
	}
	tb.click(del)
	tb.waitJS("the delete preview", `document.querySelector("#delete-dialog").open && document.querySelector("#dd-name").textContent === "api-server"`, 30*time.Second)
	tb.waitJS("the preview's lists", `document.querySelectorAll("#dd-lost li").length > 0`, 30*time.Second)
	if got := evalIn[[]string](tb, overflowJS); len(got) > 0 {
		t.Errorf("at 1280 px with the delete dialog open (a long box id in it), sideways scrolling: %v", got)
	}
	tb.click("#dd-cancel")
	tb.waitJS("the dialog closed, the menu too, focus back on the menu's button", fmt.Sprintf(`!document.querySelector("#delete-dialog").open && !document.querySelector(%q).getClientRects().length &&
	  document.activeElement === document.querySelector(%q)`, del, toggle), 10*time.Second)
	if out := os.Getenv("COMPANION_PAGE_SCREENSHOT"); out != "" {
		evalIn[bool](tb, `window.scrollTo(0, 0); document.activeElement && document.activeElement.blur(); true`)
		if err := os.WriteFile(out, tb.viewportPNG(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot written to %s", out)
	}

	// 1400×900, the wide layout: every row action in sight, still nothing sideways.
	tb.viewport(1400, 900, false)
	if got := evalIn[[]string](tb, overflowJS); len(got) > 0 {
		t.Errorf("at 1400 px, sideways scrolling: %v", got)
	}
	for _, a := range []string{"pause-resume", "keep", "exports", "conversations", "delete"} {
		sel := row(api) + fmt.Sprintf(` button[data-action=%q]`, a)
		if !evalIn[bool](tb, fmt.Sprintf(`(() => { const b = document.querySelector(%q).getBoundingClientRect(), s = document.querySelector("#ws-scroll").getBoundingClientRect();
		  return b.width > 0 && b.left >= s.left && b.right <= s.right; })()`, sel)) {
			t.Errorf("at 1400 px the row's %s button is not wholly in sight", a)
		}
	}
	if visible(row(api) + ` button[data-action="menu"]`) {
		t.Error("at 1400 px the row menu's button shows, though every action is in sight")
	}
	if out := os.Getenv("COMPANION_PAGE_SCREENSHOT_WIDE"); out != "" {
		if err := os.WriteFile(out, tb.viewportPNG(), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// 390×844: rows are cards, nothing scrolls sideways, the menu still works.
	tb.viewport(390, 844, true)
	tb.waitJS("rows as cards", fmt.Sprintf(`getComputedStyle(document.querySelector(%q)).display === "grid"`, row(alpha)), 10*time.Second)
	if got := evalIn[[]string](tb, overflowJS); len(got) > 0 {
		t.Errorf("at 390 px, sideways scrolling: %v", got)
	}
	for _, p := range tb.unnamedControls() {
		t.Errorf("at 390 px: %s", p)
	}
	if visible(row(api)+` button[data-action="exports"]`) || !visible(row(api)+` button[data-action="pause-resume"]`) {
		t.Fatal("at 390 px, Exports is not in the menu, or Pause is not in sight")
	}
	tb.click(row(api) + ` button[data-action="menu"]`)
	tb.click(row(api) + ` button[data-action="exports"]`)
	tb.waitJS("the exports panel", `!document.querySelector("#exports").hidden && document.querySelector("#exports-of").textContent.startsWith("Exports of api-server")`, 30*time.Second)
	if got := evalIn[[]string](tb, overflowJS); len(got) > 0 {
		t.Errorf("at 390 px with the exports panel, sideways scrolling: %v", got)
	}
	tb.click("#x-close")
	if out := os.Getenv("COMPANION_PAGE_SCREENSHOT_NARROW"); out != "" {
		evalIn[bool](tb, `window.scrollTo(0, 0); document.activeElement && document.activeElement.blur(); true`)
		if err := os.WriteFile(out, tb.viewportPNG(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot written to %s", out)
	}

	// Dark mode follows the system's preference.
	light := evalIn[string](tb, `getComputedStyle(document.body).backgroundColor`)
	if _, err := chromedp.Call(tb.timeout(10*time.Second), emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatalf("chromium: dark mode: %v", err)
	}
	if dark := evalIn[string](tb, `getComputedStyle(document.body).backgroundColor`); dark == light {
		t.Errorf("with prefers-color-scheme: dark the page keeps its light background %s", light)
	}
	if out := os.Getenv("COMPANION_PAGE_SCREENSHOT_DARK"); out != "" {
		tb.viewport(1280, 800, false)
		evalIn[bool](tb, `window.scrollTo(0, 0); true`)
		if err := os.WriteFile(out, tb.viewportPNG(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tb.checkClean(probed...)
}

// TestPageUnnamedControlsAreCaught proves the accessibility check can
// fail: a button with no text, an input with no label and a link with
// nothing in it are each reported.
func TestPageUnnamedControlsAreCaught(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>x</title><link rel="icon" href="data:,">
<button>Named</button><button></button><input><a href="/x"></a><label>Fine <input></label>`)
	}))
	defer srv.Close()
	tb := openTab(t, srv.URL+"/", 800, 600)
	got := tb.unnamedControls()
	want := []string{"button", "textbox", "link"}
	if len(got) != len(want) {
		t.Fatalf("unnamed controls %q, want one each of %v", got, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w+" ") {
			t.Errorf("unnamed control %d: %q, want a %s", i, got[i], w)
		}
	}
}
