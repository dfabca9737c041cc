package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPageCloudflareSaysFilesAreLost: a Cloudflare workspace is never
// shown as if a pause kept its files. The account's row and the create
// form say the sleep
// wipes them; the workspace's row says it cannot pause and what the
// sleep does (its Pause button disabled, with the reason); the delete
// dialog lists what the sleep may already have wiped among the losses.
func TestPageCloudflareSaysFilesAreLost(t *testing.T) {
	f := newCloudFarm(t, "cloudflare")
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	acct := f.account(p)
	tb := openTab(t, p.ready.PageURL, 1600, 1000)
	tb.waitJS("the live stream", `document.querySelector("#conn").dataset.state === "live"`, 30*time.Second)
	tb.waitJS("the create form knows the account", fmt.Sprintf(`document.querySelector('#c-account option[value=%q]')`, acct), 30*time.Second)
	tb.waitJS("the account says the files are lost", fmt.Sprintf(`(() => {
		const tr = document.querySelector('#accounts-table tr[data-account=%q]');
		return tr && tr.textContent.includes("cloudflare cannot pause: its sleep_wipe wipes the box's files 10 minutes after its last activity");
	})()`, acct), 30*time.Second)
	tb.choose("#c-account", acct)
	tb.waitJS("the sleep in the create form", `(t => t.includes("cloudflare wipes the box's files 10 minutes after its last activity"))(document.querySelector("#c-clocks").textContent)`, 10*time.Second)

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "sleeps"}, &created)
	id := created.Workspace.ID
	p.waitState(id, "running", time.Minute)
	cell := row(id) + ` td[data-col="retention"]`
	tb.waitJS("the row says the files are lost", fmt.Sprintf(`(() => {
		const td = document.querySelector(%q), pr = document.querySelector(%q);
		return td && td.textContent.includes("cloudflare cannot pause: its sleep_wipe wipes the box's files 10 minutes after its last activity, and nothing keeps them") &&
			pr && pr.disabled && pr.title.includes("cannot pause");
	})()`, cell, row(id)+` button[data-action="pause-resume"]`), 30*time.Second)
	if txt := tb.text(row(id)); strings.Contains(txt, "paused") && !strings.Contains(txt, "cannot pause") {
		t.Errorf("the row reads as paused: %q", txt)
	}

	tb.click(row(id) + ` button[data-action="delete"]`)
	tb.waitJS("the preview", `document.querySelector("#delete-dialog").open && document.querySelectorAll("#dd-lost li").length > 0`, 30*time.Second)
	if lost := tb.text("#dd-lost"); !strings.Contains(lost, "sleep_wipe") || !strings.Contains(lost, "already wiped") {
		t.Errorf("the delete dialog's losses %q do not name the sleep", lost)
	}
	tb.click("#dd-cancel")
	tb.checkClean(probed...)
}
