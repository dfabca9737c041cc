package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// TestPageMarksStaleRows: while an account's provider does not answer,
// the page marks that account's rows "stale", saying since when they show
// its last good list; when it answers again the mark goes.
func TestPageMarksStaleRows(t *testing.T) {
	dt := newCloudFarm(t, "daytona")
	p := start(t, options{dataDir: t.TempDir()})
	acct := dt.account(p)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "far away"}, &created)
	id := created.Workspace.ID
	p.waitState(id, "running", time.Minute)
	tb := openTab(t, p.ready.PageURL, 1600, 1000)
	tb.waitJS("the live stream", `document.querySelector("#conn").dataset.state === "live"`, 30*time.Second)
	badge := row(id) + ` td[data-col="state"] .stale`
	tb.waitJS("the row, not stale", fmt.Sprintf(`(b => b && b.hidden)(document.querySelector(%q))`, badge), 30*time.Second)

	dt.refuseAt("/sandbox", 503)
	testsupport.Poll(t, time.Minute, func() error {
		var list struct {
			Accounts []struct {
				ID     string
				Status struct{ State string }
			}
		}
		p.must(200, "GET", "/v1/accounts", nil, &list)
		for _, a := range list.Accounts {
			if a.ID == acct && a.Status.State == "failing" {
				return nil
			}
		}
		return fmt.Errorf("account %s not failing yet: %+v", acct, list.Accounts)
	})
	tb.waitJS("the stale mark and why", fmt.Sprintf(`(() => {
		const b = document.querySelector(%q), td = b && b.closest("td");
		return b && !b.hidden && b.textContent === "stale" && td.title.includes("not answering") && td.title.includes("last good list");
	})()`, badge), 30*time.Second)
	tb.checkClean(probed...)

	dt.refuseAt("/sandbox", 0)
	tb.waitJS("the mark gone once it answers", fmt.Sprintf(`(b => b && b.hidden)(document.querySelector(%q))`, badge), time.Minute)
}
