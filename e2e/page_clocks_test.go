package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// localTime is a page expression: t (RFC 3339) as the page words times.
func localTime(t time.Time) string {
	return fmt.Sprintf(`new Date(%q).toLocaleString(undefined, {dateStyle: "short", timeStyle: "medium"})`, t.UTC().Format(time.RFC3339Nano))
}

// TestPageDeletionClocks: the page says what a provider's own deletion
// clock means. In serve, the create form states the trade of Daytona's
// auto-delete (with the guard's margin), and a workspace Daytona stopped
// on its own shows the at-risk badge with the clock's due time and when
// the guard exports it. On the desktop the create form leaves the
// auto-delete out and says why; a DigitalOcean session its provider
// paused shows at risk with no time, and "Export now" exports it and
// clears the mark.
func TestPageDeletionClocks(t *testing.T) {
	dt := newCloudFarm(t, "daytona")

	// Serve: the trade is stated, the badge has the right times.
	p := start(t, options{mode: "serve", dataDir: t.TempDir()})
	acct := dt.account(p)
	tb := openTab(t, p.ready.PageURL, 1600, 1000)
	tb.waitJS("the live stream", `document.querySelector("#conn").dataset.state === "live"`, 30*time.Second)
	tb.waitJS("the create form knows the account", fmt.Sprintf(`document.querySelector('#c-account option[value=%q]')`, acct), 30*time.Second)
	tb.choose("#c-account", acct)
	tb.waitJS("the paused TTL and its trade", `!document.querySelector("#c-ttl").parentElement.hidden && !document.querySelector("#c-clocks").hidden`, 10*time.Second)
	if trade := tb.text("#c-clocks"); !strings.Contains(trade, "auto_delete") || !strings.Contains(trade, "exports first") || !strings.Contains(trade, "1 hour") {
		t.Errorf("serve's create form says %q, want the auto_delete trade with the guard's margin", trade)
	}
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "two hours",
		"lifecycle": map[string]any{"paused_ttl_seconds": 7200}}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", time.Minute).BoxID
	dt.outside(t, "POST", "/api/sandbox/"+box+"/stop")
	ws := p.waitClock(id, "at risk", time.Minute, func(c clockState) bool { return c.Deletion.AtRisk })
	if ws.Deletion.DueAt == nil || ws.Deletion.ExportBy == nil || !ws.Deletion.ExportBy.Equal(ws.Deletion.DueAt.Add(-time.Hour)) {
		t.Fatalf("deletion %+v, want a due time and export_by an hour before it", ws.Deletion)
	}
	cell := row(id) + ` td[data-col="retention"]`
	tb.waitJS("the at-risk badge with its times", fmt.Sprintf(`(() => {
		const td = document.querySelector(%q);
		return td && !td.querySelector(".risk").hidden && td.textContent.includes("auto_delete deletes it " + %s + " (in 1h 5") &&
			td.textContent.includes("companion exports it by " + %s);
	})()`, cell, localTime(*ws.Deletion.DueAt), localTime(*ws.Deletion.ExportBy)), 30*time.Second)
	tb.checkClean(probed...)

	// Desktop: no auto-delete offered; at risk with no time; Export now.
	do := newCloudFarm(t, "digitalocean")
	d := start(t, options{dataDir: t.TempDir()})
	dacct, oacct := dt.account(d), do.account(d)
	tb = openTab(t, d.ready.PageURL, 1600, 1000)
	tb.waitJS("the live stream", `document.querySelector("#conn").dataset.state === "live"`, 30*time.Second)
	tb.waitJS("the create form knows the accounts", fmt.Sprintf(`document.querySelector('#c-account option[value=%q]') && document.querySelector('#c-account option[value=%q]')`, dacct, oacct), 30*time.Second)
	tb.choose("#c-account", dacct)
	tb.waitJS("no paused TTL at Daytona", `document.querySelector("#c-ttl").parentElement.hidden && !document.querySelector("#c-clocks").hidden`, 10*time.Second)
	if why := tb.text("#c-clocks"); !strings.Contains(why, "not offered") || !strings.Contains(why, "auto_delete") {
		t.Errorf("desktop's create form says %q, want why the auto-delete is not offered", why)
	}
	tb.choose("#c-account", oacct)
	tb.waitJS("DigitalOcean's clock in the form", `(t => t.includes("may destroy an idle box") && t.includes("exports first") && t.includes("marked at risk"))(document.querySelector("#c-clocks").textContent)`, 10*time.Second)

	var made struct{ Workspace workspace }
	d.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": oacct, "name": "idle session"}, &made)
	sid := made.Workspace.ID
	sbox := d.waitState(sid, "running", time.Minute).BoxID
	do.workFile(t, sbox, "notes.txt", "notes\n")
	do.outside(t, "POST", "/v2/agents/sessions/"+sbox+"/pause")
	cell = row(sid) + ` td[data-col="retention"]`
	tb.waitJS("at risk with no published time", fmt.Sprintf(`(() => {
		const td = document.querySelector(%q), btn = document.querySelector(%q);
		return td && !td.querySelector(".risk").hidden && td.textContent.includes("inactivity_destroy may delete it at a time it does not publish") &&
			td.textContent.includes("export it now") && btn && !btn.hidden;
	})()`, cell, row(sid)+` button[data-action="export-now"]`), time.Minute)
	tb.click(row(sid) + ` button[data-action="export-now"]`)
	tb.waitJS("covered after the export", fmt.Sprintf(`(() => {
		const td = document.querySelector(%q);
		return td && td.querySelector(".risk").hidden && td.textContent.includes("exported") && !document.querySelector("#exports").hidden;
	})()`, cell), 2*time.Minute)
	if c := d.clockState(sid); c.LastExportID == "" || c.Deletion.AtRisk || c.State != "paused" {
		t.Errorf("after Export now: %+v, want an export, not at risk, still paused", c)
	}
	tb.checkClean(probed...)
}
