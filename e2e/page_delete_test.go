package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// TestPageDeletePipeline: against the binary, the Daytona emulator and a
// real agent-server process per box, the page's delete dialog shows the
// pipeline's preview (what is exported, where, the mode, that a paused
// box is woken, what is lost and what survives), deletes nothing before
// the explicit confirmation, then follows the delete: its steps until the
// workspace is gone, and, for a box whose agent-server refuses the key, the
// blocked delete's error. The account's delete_export mode is switched
// from the page, and the audit view shows the blocked delete and the
// account change.
func TestPageDeletePipeline(t *testing.T) {
	f := newFarm(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	acct := f.account(p)
	mk := func(name string) (string, string) {
		var created struct{ Workspace workspace }
		p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": name}, &created)
		return created.Workspace.ID, p.waitState(created.Workspace.ID, "running", time.Minute).BoxID
	}
	refused, refusedBox := mk("refuses the key")
	f.box(refusedBox).key = "not-the-key"
	sleeper, sleeperBox := mk("sleeper")
	f.converse(t, sleeperBox)
	p.pauseAndWait(sleeper)

	tb := openTab(t, p.ready.PageURL, 1400, 1000)
	tb.waitJS("both rows", fmt.Sprintf(`%s && %s`, stateIs(refused, "running"), stateIs(sleeper, "paused")), 30*time.Second)

	// Blocked: the dialog says what would be exported, then why nothing was deleted.
	tb.click(row(refused) + ` button[data-action="delete"]`)
	tb.waitJS("the preview", `document.querySelector("#delete-dialog").open && document.querySelectorAll("#dd-captures li").length > 0`, 30*time.Second)
	plan := tb.text("#dd-export-plan")
	if !strings.Contains(plan, "mode required") || !strings.Contains(plan, "tar.gz") || !strings.Contains(plan, "not woken") {
		t.Fatalf("export plan of a running box: %q", plan)
	}
	if !evalIn[bool](tb, `document.querySelector("#dd-confirm").disabled`) {
		t.Fatal("confirm enabled before the acknowledgement")
	}
	tb.click("#dd-ack")
	tb.click("#dd-confirm")
	tb.waitJS("the blocked delete's error", `!document.querySelector("#dd-error").hidden && document.querySelector("#dd-error").textContent.startsWith("delete blocked: ") && document.querySelector("#dd-progress").textContent.includes("without deleting")`, 2*time.Minute)
	if got := tb.text("#dd-error"); !strings.Contains(got, "401") || !strings.Contains(got, "best_effort") {
		t.Errorf("blocked error %q does not say why and what to do", got)
	}
	if f.gone(refusedBox) {
		t.Fatal("the box was deleted although its export failed")
	}
	tb.click("#dd-cancel")
	tb.waitJS("the dialog closed", `!document.querySelector("#delete-dialog").open`, 10*time.Second)

	// A paused box: woken, exported, deleted; the dialog follows each step.
	tb.click(row(sleeper) + ` button[data-action="delete"]`)
	tb.waitJS("the preview", `document.querySelector("#delete-dialog").open && document.querySelector("#dd-export-plan").textContent.includes("woken for it")`, 30*time.Second)
	evalIn[bool](tb, `(() => { window.__steps = []; const p = document.querySelector("#dd-progress");
	  new MutationObserver(() => window.__steps.push(p.textContent)).observe(p, {subtree: true, childList: true, characterData: true}); return true; })()`)
	tb.click("#dd-ack")
	tb.click("#dd-confirm")
	tb.waitJS("the delete's end", `document.querySelector("#dd-progress").textContent.startsWith("Deleted.") && document.querySelector("#dd-error").hidden`, 2*time.Minute)
	steps := evalIn[[]string](tb, `window.__steps`)
	if len(steps) < 2 || !strings.HasPrefix(steps[0], "Delete started") && !strings.HasPrefix(steps[0], "Deleting") {
		t.Fatalf("the dialog did not follow the delete: %q", steps)
	}
	t.Logf("delete steps shown: %q", steps)
	tb.waitJS("the row gone", fmt.Sprintf(`!document.querySelector(%q)`, row(sleeper)), 30*time.Second)
	tb.click("#dd-cancel")

	// The account's mode, from the page.
	sel := fmt.Sprintf(`#accounts-table tr[data-account=%q] select[data-action="delete-export"]`, acct)
	tb.waitJS("the mode select", fmt.Sprintf(`document.querySelector(%q).value === "required"`, sel), 10*time.Second)
	tb.choose(sel, "best_effort")
	var accts struct {
		Accounts []struct {
			ID           string `json:"id"`
			DeleteExport string `json:"delete_export"`
		}
	}
	testsupport.Poll(t, 30*time.Second, func() error {
		p.must(200, "GET", "/v1/accounts", nil, &accts)
		for _, a := range accts.Accounts {
			if a.ID == acct && a.DeleteExport == "best_effort" {
				return nil
			}
		}
		return fmt.Errorf("the page did not make account %s best effort: %+v", acct, accts)
	})

	// The audit view: the blocked delete and the account change.
	tb.waitJS("the audit entries", `(document.querySelector("#audit-refresh").click(), document.querySelector('#audit-table tr[data-action="delete"][data-outcome="blocked"]')) &&
	  [...document.querySelectorAll('#audit-table tr[data-action="account_change"]')].some(r => r.textContent.includes("best_effort"))`, 30*time.Second)
	tb.checkClean(probed...)
}
