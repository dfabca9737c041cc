package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/digitalocean"
	"github.com/canvasapp/companion/e2e/emulators/e2b"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
)

// emulated is what the cloud tests need from an emulator.
type emulated interface {
	Handler() http.Handler
	Clock() *emulator.Clock
	Faults() *emulator.Faults
	Requests() *emulator.Log
	Close()
}

// cloudCase is one provider driven through its first-party Wasm module.
type cloudCase struct {
	provider string
	srv      emulated
	base     string // the API's path under the server, for the api_url override
	listPath string // the path of the list call a reconcile pass makes
	// seedForeign makes a box at the provider that companion did not create.
	seedForeign func(name string) string
	// native asserts the box got the idle setting asked at creation.
	native func(t *testing.T, boxID string)
	// gone reports whether the provider no longer has the box.
	gone func(boxID string) bool
}

const cloudToken = "tok-e2e-4f1c9a7d2b"

func cloudCases() []cloudCase {
	dt := daytona.New(daytona.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
	eb := e2b.New(e2b.Options{Token: cloudToken, Clock: emulator.NewWallClock()})
	do := digitalocean.New(digitalocean.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &digitalocean.Delays{}})
	return []cloudCase{
		{
			provider: "daytona", srv: dt, base: "/api", listPath: "/api/sandbox",
			seedForeign: func(name string) string { return dt.Seed(daytona.SeedSandbox{Name: name}).ID },
			native: func(t *testing.T, id string) {
				sb, ok := dt.Sandbox(id)
				if !ok || sb.AutoStopInterval != 10 {
					t.Fatalf("daytona box autoStopInterval = %d, want 10 (minutes)", sb.AutoStopInterval)
				}
			},
			gone: func(id string) bool {
				sb, ok := dt.Sandbox(id)
				return !ok || sb.State == daytona.StateDestroyed
			},
		},
		{
			provider: "e2b", srv: eb, listPath: "/v2/sandboxes",
			seedForeign: func(name string) string {
				return eb.Seed(e2b.Sandbox{TemplateID: "base", Metadata: map[string]string{"name": name}}).SandboxID
			},
			native: func(t *testing.T, id string) {
				sb, ok := eb.Sandbox(id)
				if !ok || !sb.AutoPause || sb.EndAt.Sub(sb.StartedAt) != 10*time.Minute {
					t.Fatalf("e2b box: autoPause %v, timeout %v; want autoPause and 10m", sb.AutoPause, sb.EndAt.Sub(sb.StartedAt))
				}
			},
			gone: func(id string) bool { _, ok := eb.Sandbox(id); return !ok },
		},
		{
			provider: "digitalocean", srv: do, listPath: "/v2/agents/sessions",
			seedForeign: func(name string) string {
				return do.Seed(digitalocean.Session{Name: name, AgentKind: "openhands"}).SessionID
			},
			native: func(t *testing.T, id string) {
				s, ok := do.Session(id)
				if !ok || s.IdleTimeoutSeconds != 600 {
					t.Fatalf("digitalocean session idle_timeout_seconds = %d, want 600", s.IdleTimeoutSeconds)
				}
			},
			gone: func(id string) bool {
				s, ok := do.Session(id)
				return !ok || s.Status == digitalocean.StatusDestroyed || s.Status == digitalocean.StatusDestroying
			},
		},
	}
}

// TestCloudProvidersThroughWasmModules drives each first-party module, run
// sandboxed inside the companion binary, against its provider's emulator:
// add an account (token to the keyring), create, pause, resume, delete,
// adopt, native idle pause, rate limits and 5xx, with every change seen on
// the WebSocket, and the token never leaving the keyring.
func TestCloudProvidersThroughWasmModules(t *testing.T) {
	for _, c := range cloudCases() {
		t.Run(c.provider, func(t *testing.T) {
			srv := httptest.NewServer(c.srv.Handler())
			t.Cleanup(func() { c.srv.Close(); srv.Close() })
			testCloudProvider(t, c, srv.URL+c.base)
		})
	}
}

func testCloudProvider(t *testing.T, c cloudCase, apiURL string) {
	data := t.TempDir()
	// A short export budget: these boxes run no agent-server, and a
	// best-effort delete gives up on the export once it is spent.
	p := start(t, options{dataDir: data, args: []string{"--docker-scope", "unused", "--export-budget", "3s"}})
	s := p.dial(-1)
	s.next(10 * time.Second)

	// A wrong token is refused when the account is added.
	var e apiError
	p.must(502, "POST", "/v1/accounts", map[string]any{
		"provider": c.provider, "label": "wrong", "config": map[string]string{"api_url": apiURL},
		"credentials": map[string]string{"token": "not-the-token"},
	}, &e)
	if e.Error.Code != "provider_unauthorized" || !strings.Contains(e.Error.Message, "refused") {
		t.Fatalf("wrong token: %+v", e)
	}
	var acct struct {
		Account struct {
			ID          string   `json:"id"`
			Credentials []string `json:"credentials"`
		} `json:"account"`
	}
	raw := p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": c.provider, "label": c.provider + " team", "config": map[string]string{"api_url": apiURL},
		"credentials": map[string]string{"token": cloudToken},
	}, &acct)
	if bytes.Contains(raw, []byte(cloudToken)) || len(acct.Account.Credentials) != 1 {
		t.Fatalf("add account answered %s", raw)
	}
	acctID := acct.Account.ID
	// These boxes run no agent-server, so a required export would block
	// the delete (delete_pipeline_test.go covers that) and, where the
	// provider has a deletion clock, the pause (clocks_test.go): this
	// account opts into best-effort export.
	p.must(200, "PATCH", "/v1/accounts/"+acctID, map[string]string{"delete_export": "best_effort"}, nil)

	// Create with a native idle setting.
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{
		"account_id": acctID, "name": "cloud-" + c.provider,
		"lifecycle": map[string]int{"idle_pause_after_seconds": 600},
	}, &created)
	id := created.Workspace.ID
	w := s.waitFor("running", 60*time.Second, upsertOf(id, "running")).Workspace
	box := w.BoxID
	c.native(t, box)

	// A box made elsewhere is adopted.
	foreign := c.seedForeign("made-in-the-console")
	adopted := s.waitFor("adopted box", 30*time.Second, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.BoxID == foreign
	})
	if !adopted.Workspace.Adopted || adopted.Workspace.AccountID != acctID {
		t.Fatalf("foreign box not marked adopted: %s", adopted.Raw)
	}

	// Pause, and while paused nothing but reads touches the box.
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	paused := s.waitFor("paused", 60*time.Second, upsertOf(id, "paused"))
	if paused.Workspace.PausedAt == nil {
		t.Fatalf("paused without paused_at: %s", paused.Raw)
	}
	if c.provider == "digitalocean" {
		// Its inactivity clock makes the pause export first; that export
		// fails (no agent-server) and, best effort, the pause goes on.
		if a := p.auditOf(id); !auditHas(a, "", "export", "failed") {
			t.Errorf("no failed export before the best-effort pause: %+v", a)
		}
	}
	c.srv.Requests().Reset()
	// Two list calls after the reset mean at least one whole reconcile
	// pass ran while the box was paused.
	testsupport.Poll(t, 30*time.Second, func() error {
		if n := len(listCalls(c.srv.Requests(), c.listPath)); n < 2 {
			return fmt.Errorf("%d list calls since pausing, want 2 (no reconcile pass ran)", n)
		}
		return nil
	})
	for _, r := range c.srv.Requests().All() {
		if strings.Contains(r.Path, box) && r.Method != "GET" {
			t.Fatalf("paused box was acted on by bookkeeping: %s %s", r.Method, r.Path)
		}
	}
	p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	s.waitFor("running again", 60*time.Second, upsertOf(id, "running"))

	// Two 503s on the next pause are retried; the pause still happens.
	c.srv.Faults().Add(emulator.Fault{Kind: emulator.FaultStatus, Status: 503, Count: 2, Method: "POST", PathPrefix: ""})
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	s.waitFor("paused despite 503s", 60*time.Second, upsertOf(id, "paused"))
	if n := countFaults(c.srv.Requests(), "status"); n != 2 {
		t.Fatalf("%d requests got the injected 503, want 2", n)
	}
	p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	s.waitFor("running after 503 test", 60*time.Second, upsertOf(id, "running"))

	// Rate limited lists back off, lose nothing, and recover.
	c.srv.Requests().Reset()
	c.srv.Faults().RateLimit(3, 2*time.Second)
	second := c.seedForeign("made-in-the-console-too")
	s.waitFor("second foreign box after rate limiting", 90*time.Second, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.BoxID == second
	})
	if n := countFaults(c.srv.Requests(), "rate_limit"); n != 3 {
		t.Fatalf("%d requests rate limited, want 3", n)
	}
	p.waitLog("reconcile failed; backing off", map[string]string{"kind": "rate_limited"}, 5*time.Second)
	var list struct {
		Workspaces []workspace `json:"workspaces"`
	}
	p.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 3 {
		t.Fatalf("%d workspaces after rate limiting, want 3", len(list.Workspaces))
	}

	// The provider pauses the idle box on its own (native first).
	c.srv.Clock().Advance(11 * time.Minute)
	idle := s.waitFor("native idle pause", 60*time.Second, upsertOf(id, "paused"))
	if idle.Workspace.PausedAt == nil {
		t.Fatalf("idle-paused without paused_at: %s", idle.Raw)
	}

	// Delete: preview, confirm, remove; the box is gone at the provider.
	p.deleteConfirmed(id)
	s.waitFor("remove", 60*time.Second, func(m wsMsg) bool { return m.Type == "remove" && m.ID == id })
	if !c.gone(box) {
		t.Fatalf("box %s still exists at %s after delete", box, c.provider)
	}

	// The token was never written anywhere but the keyring.
	p.stop()
	if strings.Contains(p.stderr.String(), cloudToken) {
		t.Fatal("token in companion's logs")
	}
	if strings.Contains(s.seen.String(), cloudToken) {
		t.Fatal("token in a WebSocket message")
	}
	files, _ := filepath.Glob(filepath.Join(data, "companion.db*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte(cloudToken)) {
			t.Fatalf("token in %s", f)
		}
	}
	if len(files) == 0 {
		t.Fatal("no database files to check")
	}
}

// listCalls returns the logged list calls (GET of the list path).
func listCalls(l *emulator.Log, path string) []emulator.Request {
	var out []emulator.Request
	for _, r := range l.All() {
		if r.Method == "GET" && r.Path == path && r.Status == 200 {
			out = append(out, r)
		}
	}
	return out
}

func countFaults(l *emulator.Log, kind string) int {
	n := 0
	for _, r := range l.All() {
		if string(r.Fault) == kind {
			n++
		}
	}
	return n
}
