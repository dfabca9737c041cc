package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPageRetentionAndRestore: companion serve with real Docker, driven
// from the page. The retention form can be saved only after a dry run of
// its exact values was shown (changing a value disables Save again); once
// saved, the paused workspace shows its delete_after, the retention
// warning notice appears, and the totals footer prices the stored bytes.
// An export of a Docker workspace offers Restore, whose dialog shows the
// preview and, confirmed, brings it back as a new workspace that appears
// in the table. The audit view shows the restore and the retention
// entries.
func TestPageRetentionAndRestore(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	p := start(t, options{mode: "serve", dataDir: t.TempDir(), args: []string{"--listen", "127.0.0.1:0", "--docker-image", image,
		"--docker-scope", scope, "--retention-interval", "200ms"}})
	ws := p.createRunning("keeper", "napper")
	putBigFile(t, ws["napper"].BoxID, 1<<20)
	napper := p.pauseAndWait(ws["napper"].ID).ID
	keeper := ws["keeper"].ID

	tb := openTab(t, p.ready.PageURL, 1600, 1200)
	tb.waitJS("the retention form", `!document.querySelector("#retention").hidden && document.querySelector("#r-account").value === "local-docker" && document.querySelector("#r-warn").value === "24"`, 30*time.Second)
	tb.waitJS("napper paused", stateIs(napper, "paused"), 30*time.Second)
	if got := tb.text("#r-scheduler"); !strings.HasPrefix(got, "Enforced here") {
		t.Errorf("scheduler note %q, want enforced in serve mode", got)
	}
	fill := func(sel, v string) {
		evalIn[bool](tb, fmt.Sprintf(`document.querySelector(%q).value = ""; true`, sel))
		tb.typeInto(sel, v)
	}
	saveDisabled := `document.querySelector("#r-save").disabled`
	tb.click("#r-enabled")
	fill("#r-paused", "1")
	fill("#r-warn", "2")
	fill("#r-price", "0.5")
	if !evalIn[bool](tb, saveDisabled) {
		t.Fatal("Save is enabled before a dry run")
	}
	tb.click("#r-preview")
	tb.waitJS("the dry run", fmt.Sprintf(`document.querySelector("#r-result").textContent.includes("would delete 1 workspace") && document.querySelector('#r-table tr[data-id=%q]') && !(%s)`, napper, saveDisabled), 30*time.Second)
	fill("#r-price", "0.25") // not what the dry run showed
	if !evalIn[bool](tb, saveDisabled) {
		t.Fatal("Save stays enabled after a value changed since the dry run")
	}
	var pol retentionAnswer
	p.must(200, "GET", "/v1/accounts/local-docker/retention", nil, &pol)
	if pol.Retention.Enabled {
		t.Fatal("a policy was saved without its dry run")
	}
	tb.click("#r-preview")
	tb.waitJS("the second dry run", `!(`+saveDisabled+`) && document.querySelector("#r-result").textContent.includes("per month")`, 30*time.Second)
	tb.click("#r-save")
	tb.waitJS("saved", `document.querySelector("#r-result").textContent === "Saved."`, 30*time.Second)
	p.must(200, "GET", "/v1/accounts/local-docker/retention", nil, &pol)
	if !pol.Retention.Enabled || pol.Retention.PausedForSeconds != 3600 || pol.Retention.WarnBeforeSeconds != 7200 {
		t.Fatalf("saved policy %+v", pol.Retention)
	}

	// delete_after in the table, the warning, the money.
	tb.waitJS("napper's delete_after", fmt.Sprintf(`document.querySelector(%q).textContent.startsWith("delete after ")`, row(napper)+` td[data-col="retention"]`), 30*time.Second)
	tb.waitJS("the retention warning", fmt.Sprintf(`!document.querySelector("#notices").hidden && document.querySelector('#notice-list li[data-kind="retention_warning"][data-id=%q]').textContent.includes("napper")`, napper), 30*time.Second)
	tb.waitJS("the money in the totals", `/ · \d+\.\d\d per month \(\d+ priced\)$/.test(document.querySelector("#ws-totals").textContent)`, 30*time.Second)

	// Restore from an export of keeper: a new workspace appears.
	tb.click(row(keeper) + ` button[data-action="exports"]`)
	tb.waitJS("the exports panel", `!document.querySelector("#exports").hidden`, 10*time.Second)
	tb.click("#x-start")
	tb.waitJS("a restorable export", `document.querySelector('#exports-table button[data-action="restore"]')`, 3*time.Minute)
	tb.click(`#exports-table button[data-action="restore"]`)
	tb.waitJS("the restore preview", `document.querySelector("#restore-dialog").open && !document.querySelector("#rd-confirm").disabled`, 30*time.Second)
	tb.click("#rd-confirm")
	restored := p.workspaceNamed("keeper (restored)")
	tb.waitJS("the restored workspace running", stateIs(restored, "running"), 3*time.Minute)

	// The audit view: the restore and the retention entries.
	for _, a := range []string{"restore", "retention_policy", "retention_warn", "retention_schedule"} {
		tb.waitJS("the audit's "+a, fmt.Sprintf(`(document.querySelector("#audit-refresh").click(), document.querySelector('#audit-table tr[data-action=%q]'))`, a), 30*time.Second)
	}
	tb.checkClean(probed...)
}
