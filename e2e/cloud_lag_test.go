package e2e

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
)

// TestLaggingListConfirmedByGet: Daytona's list is eventually consistent,
// so a box companion just made is missing from it for a while. Reconcile
// passes must confirm with Get before calling the box gone: the workspace
// stays running, and the emulator sees the Get.
func TestLaggingListConfirmedByGet(t *testing.T) {
	dt := daytona.New(daytona.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}, ListLag: time.Hour})
	srv := httptest.NewServer(dt.Handler())
	t.Cleanup(func() { dt.Close(); srv.Close() })

	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	s := p.dial(-1)
	s.next(10 * time.Second)
	var acct struct{ Account struct{ ID string } }
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "daytona", "label": "lagging", "config": map[string]string{"api_url": srv.URL + "/api"},
		"credentials": map[string]string{"token": cloudToken},
	}, &acct)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct.Account.ID, "name": "lagging-list"}, &created)
	id := created.Workspace.ID
	box := s.waitFor("running", 60*time.Second, upsertOf(id, "running")).Workspace.BoxID

	// From here on the list never shows the box (it lags an hour).
	dt.Requests().Reset()
	testsupport.Poll(t, 30*time.Second, func() error {
		if n := len(listCalls(dt.Requests(), "/api/sandbox")); n < 2 {
			return fmt.Errorf("%d list calls since the create, want 2 (no reconcile pass ran)", n)
		}
		return nil
	})
	confirmed := false
	for _, r := range dt.Requests().All() {
		if r.Method == "GET" && r.Path == "/api/sandbox/"+box {
			confirmed = true
		}
		if r.Method != "GET" {
			t.Fatalf("reconcile acted on the account: %s %s", r.Method, r.Path)
		}
	}
	if !confirmed {
		t.Fatalf("box %s missing from the list was never confirmed with Get", box)
	}
	var got struct{ Workspace workspace }
	p.must(200, "GET", "/v1/workspaces/"+id, nil, &got)
	if got.Workspace.State != "running" || got.Workspace.BoxID != box {
		t.Fatalf("after passes with a lagging list: %+v; want still running on box %s", got.Workspace, box)
	}
	if strings.Contains(s.seen.String(), `"state":"deleted"`) {
		t.Fatal("the stream reported the workspace deleted while its box existed")
	}
}
