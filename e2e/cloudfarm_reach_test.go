package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/digitalocean"
	"github.com/canvasapp/companion/e2e/emulators/e2b"
	"github.com/canvasapp/companion/e2e/emulators/emulator/emutest"
	"github.com/canvasapp/companion/internal/testsupport"
)

// The farm on each provider, through the companion binary: a workspace is
// created there, companion reaches the box's own agent-server process
// through the module's endpoint and the provider's proxy
// (GET /v1/workspaces/{id}/agent), the box's disk is its directory, and
// after a pause and resume companion reaches it again however the
// provider changed the endpoint (Daytona: a new preview token; E2B: the
// same host and token; DigitalOcean: a new ingress hostname).

func TestCloudFarmDaytona(t *testing.T)      { testCloudFarm(t, "daytona") }
func TestCloudFarmE2B(t *testing.T)          { testCloudFarm(t, "e2b") }
func TestCloudFarmDigitalOcean(t *testing.T) { testCloudFarm(t, "digitalocean") }

func testCloudFarm(t *testing.T, provider string) {
	f := newCloudFarm(t, provider)
	dataDir := t.TempDir()
	p := start(t, options{dataDir: dataDir})
	acct := f.account(p)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "farm-" + provider}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", 60*time.Second).BoxID

	firstHost := f.agentThroughCompanion(t, p, id, box)
	if !strings.HasSuffix(firstHost, ".localhost:"+f.port()) {
		t.Fatalf("companion reached the box at %s, not through the provider's proxy", firstHost)
	}

	// The box holds the key companion keeps, and its agent-server takes
	// it; DigitalOcean's module puts none in the box.
	key, err := f.boxKey(box)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := keyringOf(t, dataDir).Get(context.Background(), core.AgentKeyKey(id))
	if err != nil || len(kept) != 64 {
		t.Fatalf("keyring holds %d characters (%v), want companion's 256-bit hex key", len(kept), err)
	}
	if want := map[bool]string{true: "", false: kept}[provider == "digitalocean"]; key != want {
		t.Fatalf("the box's agent-server key is %q characters long, want the keyring's (%d)", key, len(want))
	}
	if code, body := f.callBox(t, box, "GET", "/api/conversations/count"); code != 200 {
		t.Fatalf("authenticated route through the proxy: %d %s", code, body)
	}
	if key != "" {
		base, hdr, _ := f.endpoint(box)
		hdr.Set("X-Session-API-Key", "not-the-key")
		if code, _ := f.via(t, base, hdr, "GET", "/api/conversations/count"); code != 401 {
			t.Fatalf("a wrong agent-server key answered %d, want 401", code)
		}
	}
	// The box's disk is its directory on this machine.
	marker := filepath.Join(f.boxDir(box), "workspace", "marker")
	if err := os.WriteFile(marker, []byte("before the pause"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.wantMarker(t, box, "before the pause")

	oldURL, oldHdr, err := f.endpoint(box)
	if err != nil {
		t.Fatal(err)
	}
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", 60*time.Second)
	p.must(409, "GET", "/v1/workspaces/"+id+"/agent", nil, nil)
	// A suspended box does not answer: Daytona's stopped sandbox and
	// E2B's paused one 502, DigitalOcean's revoked ingress 404.
	wantWhilePaused := map[string]int{"daytona": 502, "e2b": 502, "digitalocean": 404}[provider]
	if code, body := f.via(t, oldURL, oldHdr, "GET", "/server_info"); code != wantWhilePaused {
		t.Fatalf("the old endpoint of the paused box answered %d %s, want %d", code, body, wantWhilePaused)
	}

	p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	p.waitState(id, "running", 60*time.Second)
	secondHost := f.agentThroughCompanion(t, p, id, box)
	f.wantMarker(t, box, "before the pause")

	newURL, newHdr, err := f.endpoint(box)
	if err != nil {
		t.Fatal(err)
	}
	oldCode, _ := f.via(t, oldURL, oldHdr, "GET", "/server_info")
	switch provider {
	case "daytona":
		// The module suspends with stop: the start gave a new token, and
		// companion used it (it asks for the endpoint on every read).
		tok := daytona.PreviewTokenHeader
		if newHdr.Get(tok) == oldHdr.Get(tok) || newURL != oldURL || secondHost != firstHost {
			t.Fatalf("after stop/start: %s (token changed: %v), companion at %s then %s; want the same URL with a new token",
				newURL, newHdr.Get(tok) != oldHdr.Get(tok), firstHost, secondHost)
		}
		if oldCode != 401 {
			t.Fatalf("the token from before the stop answered %d, want 401", oldCode)
		}
	case "e2b":
		if newURL != oldURL || newHdr.Get(e2b.TrafficTokenHeader) != oldHdr.Get(e2b.TrafficTokenHeader) || secondHost != firstHost || oldCode != 200 {
			t.Fatalf("after pause/resume: %s (was %s), companion at %s then %s, old endpoint %d; want all unchanged",
				newURL, oldURL, firstHost, secondHost, oldCode)
		}
	case "digitalocean":
		u, _ := url.Parse(newURL)
		if secondHost == firstHost || secondHost != u.Host {
			t.Fatalf("companion reached the session at %s before the pause and %s after; the ingress is now %s", firstHost, secondHost, u.Host)
		}
		if oldCode != 404 {
			t.Fatalf("the revoked ingress answered %d, want 404", oldCode)
		}
	}
}

// agentThroughCompanion reads GET /v1/workspaces/{id}/agent and checks it
// is the box's own agent-server process that answered, through the
// provider's proxy; it returns the host companion reached it at.
func (f *cloudFarm) agentThroughCompanion(t *testing.T, p *proc, id, box string) string {
	t.Helper()
	since := len(f.requests())
	var agent struct {
		Agent struct {
			UptimeSeconds *float64 `json:"uptime_seconds"`
			Version       string   `json:"version"`
		} `json:"agent"`
	}
	testsupport.Poll(t, 30*time.Second, func() error {
		if code, raw := p.call("GET", "/v1/workspaces/"+id+"/agent", nil, &agent); code != 200 {
			return fmt.Errorf("GET agent: %d %s", code, raw)
		}
		return nil
	})
	proc, err := f.process(box)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(proc.String() + "/server_info")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var direct struct{ Version string }
	if err := json.NewDecoder(resp.Body).Decode(&direct); err != nil {
		t.Fatal(err)
	}
	if agent.Agent.UptimeSeconds == nil || agent.Agent.Version != direct.Version {
		t.Fatalf("companion's agent info %+v, want the box's agent-server (version %s)", agent.Agent, direct.Version)
	}
	apiHost := strings.TrimPrefix(f.srv.URL, "http://")
	host := ""
	for _, l := range f.requests()[since:] {
		var m, h, path string
		var code int
		if _, err := fmt.Sscanf(l, "%s %s %s -> %d", &m, &h, &path, &code); err == nil &&
			m == "GET" && path == "/server_info" && code == 200 && h != apiHost {
			host = h
		}
	}
	if host == "" {
		t.Fatalf("no proxied /server_info in the farm's log:\n%s", strings.Join(f.requests()[since:], "\n"))
	}
	return host
}

// wantMarker reads /workspace/marker of the box through its proxy.
func (f *cloudFarm) wantMarker(t *testing.T, box, want string) {
	t.Helper()
	code, body := f.callBox(t, box, "GET", "/api/file/download?path=/workspace/marker")
	if code != 200 || string(body) != want {
		t.Fatalf("/workspace/marker through the proxy: %d %q, want %q", code, body, want)
	}
}

// TestCloudFarmWebSocket: on every provider's farm a WebSocket upgrade and
// a streamed answer get through the farm's log wrapper and the
// provider's proxy to what stands behind the box's port 8000 (a stand-in
// here: the agent-server emulator has no WebSocket route).
func TestCloudFarmWebSocket(t *testing.T) {
	for _, provider := range farmProviders {
		t.Run(provider, func(t *testing.T) {
			f := newCloudFarm(t, provider)
			var box string
			switch provider {
			case "daytona":
				box = f.dt.Seed(daytona.SeedSandbox{Name: "ws"}).ID
			case "e2b":
				box = f.eb.Seed(e2b.Sandbox{Private: true}).SandboxID
			case "digitalocean":
				box = f.do.Seed(digitalocean.Session{Name: "ws"}).SessionID
			case "cloudflare":
				box = "wsbox"
			}
			stand := emutest.NewAgentStandIn()
			t.Cleanup(stand.Release) // before the farm closes: it waits for open streams
			// What stands behind port 8000 is keyed by the box, and at
			// Cloudflare by the sandbox's container.
			behind := box
			if provider == "cloudflare" {
				c, err := f.cf.Seed(box, "")
				if err != nil {
					t.Fatal(err)
				}
				behind = c.ID
			}
			f.box(behind).serve = stand.For(box)
			base, hdr, err := f.endpoint(box)
			if err != nil {
				t.Fatal(err)
			}
			host := emutest.Endpoint(t, f.srv.URL, base)
			emutest.CheckWebSocket(t, f.srv.URL, host, "/sockets/events/c1", hdr)
			var flat []string
			for k := range hdr {
				flat = append(flat, k, hdr.Get(k))
			}
			emutest.CheckStreams(t, stand, f.srv.URL, host, flat...)
			testsupport.Poll(t, 5*time.Second, func() error {
				for _, l := range f.requests() {
					if strings.Contains(l, host+" /sockets/events/c1 -> 101") {
						return nil
					}
				}
				return fmt.Errorf("the upgrade is not logged as 101:\n%s", strings.Join(f.requests(), "\n"))
			})
		})
	}
}
