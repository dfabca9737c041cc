package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/e2b"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// TestFailedCreateIsDeletable: a workspace whose create failed has no box.
// Its preview says so plainly, and it is removed at once by the delete,
// with the provider reachable (nothing there: the record goes) and with
// the provider unreachable (no retries, no claim that a box exists).
func TestFailedCreateIsDeletable(t *testing.T) {
	for _, reachable := range []bool{true, false} {
		name := "provider reachable"
		if !reachable {
			name = "provider unreachable"
		}
		t.Run(name, func(t *testing.T) {
			emu := e2b.New(e2b.Options{Token: cloudToken, Clock: emulator.NewWallClock()})
			srv := httptest.NewServer(emu.Handler())
			t.Cleanup(func() { emu.Close(); srv.Close() })
			p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
			s := p.dial(-1)
			s.next(10 * time.Second)
			var acct struct {
				Account struct {
					ID string `json:"id"`
				} `json:"account"`
			}
			p.must(201, "POST", "/v1/accounts", map[string]any{
				"provider": "e2b", "label": "e2b", "config": map[string]string{"api_url": srv.URL},
				"credentials": map[string]string{"token": cloudToken},
			}, &acct)

			// The provider refuses the create (a 400 is not retried).
			emu.Faults().Add(emulator.Fault{Kind: emulator.FaultStatus, Status: 400, Count: 10, Method: "POST", PathPrefix: "/sandboxes"})
			var created struct{ Workspace workspace }
			p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct.Account.ID, "name": "doomed"}, &created)
			id := created.Workspace.ID
			failed := s.waitFor("create failed", 60*time.Second, upsertOf(id, "error")).Workspace
			if failed.BoxID != "" || !strings.Contains(failed.Error, "create failed") {
				t.Fatalf("failed create: %+v", failed)
			}
			if !reachable {
				srv.Close() // connections are refused from now on
			}

			var preview struct {
				Token    string   `json:"token"`
				Lost     []string `json:"lost"`
				Survives []string `json:"survives"`
			}
			p.must(200, "POST", "/v1/workspaces/"+id+"/delete-preview", nil, &preview)
			text := strings.Join(append(preview.Lost, preview.Survives...), " | ")
			if !strings.Contains(text, "no box") || strings.Contains(text, "the box ") || strings.Contains(text, "  ") {
				t.Fatalf("preview of a workspace with no box reads: %s", text)
			}

			// Well below the ~16 s the retries of an unreachable provider took.
			client := &http.Client{Timeout: 10 * time.Second}
			var deleted struct{ Workspace workspace }
			status, raw := p.callWith(client, "POST", "/v1/workspaces/"+id+"/delete", map[string]string{"token": preview.Token}, &deleted)
			if status != 202 || deleted.Workspace.State != "deleted" {
				t.Fatalf("delete: %d %s", status, raw)
			}
			if strings.Contains(string(raw), "still exists") {
				t.Fatalf("delete claims a box: %s", raw)
			}
			// Removed by the time delete answered: no background retries.
			var e apiError
			p.must(404, "GET", "/v1/workspaces/"+id, nil, &e)
			s.waitFor("remove", 10*time.Second, func(m wsMsg) bool { return m.Type == "remove" && m.ID == id })
			if !reachable {
				p.waitLog("could not look for a box left by a failed create; removing the record anyway (the reconciler adopts such a box if it exists)",
					map[string]string{"workspace": id}, 5*time.Second)
			}
		})
	}
}
