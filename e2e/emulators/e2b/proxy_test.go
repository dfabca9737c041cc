package e2b

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator/emutest"
)

// proxied is a harness whose sandbox proxy forwards port 8000 to a
// stand-in agent-server.
func proxied(t *testing.T, o Options) (*harness, *emutest.AgentStandIn) {
	t.Helper()
	a := emutest.NewAgentStandIn()
	o.AgentServer = a.For
	h := newHarness(t, o)
	t.Cleanup(a.Release) // before the server closes: it waits for open streams
	u, _ := url.Parse(h.srv.URL)
	h.s.SetDomain("localhost:" + u.Port())
	return h, a
}

// private creates a sandbox the way the module does (private traffic,
// agent key in envVars) and returns its 8000 host and traffic token.
func (h *harness) private(extra string) (id, host, tok string) {
	h.t.Helper()
	c := h.create(`{"templateID":"base","timeout":600,"envVars":{"OH_SESSION_API_KEYS_0":"k"},"network":{"allowPublicTraffic":false}` + extra + `}`)
	if c.Domain == nil || c.TrafficAccessToken == "" {
		h.t.Fatalf("create answered %+v", c)
	}
	return c.SandboxID, "8000-" + c.SandboxID + "." + *c.Domain, c.TrafficAccessToken
}

func TestProxyReachesAgentServer(t *testing.T) {
	h, a := proxied(t, Options{})
	id, host, tok := h.private("")
	end := h.detail(id).EndAt

	h.s.Clock().Advance(time.Minute)
	r := emutest.Via(t, h.srv.URL, host, "GET", "/server_info", TrafficTokenHeader, tok, "X-Session-API-Key", "k")
	var info struct{ Title, Version string }
	h.want(r, 200).Decode(t, &info)
	if info.Title != id || info.Version != emutest.Version {
		t.Fatalf("server_info %+v, want the stand-in of %s", info, id)
	}
	if got := a.Last(id).Get("X-Session-API-Key"); got != "k" {
		t.Fatalf("the session key did not pass: %q", got)
	}
	if d := h.detail(id); !d.EndAt.Equal(end) {
		t.Fatalf("traffic moved the TTL: %v → %v", end, d.EndAt)
	}
	h.wantError(emutest.Via(t, h.srv.URL, host, "GET", "/server_info"), 403, "traffic access token")
	h.wantError(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", TrafficTokenHeader, "nope"), 403, "traffic access token")

	// Another port: the real proxy's port-closed answer.
	other := "3000-" + host[len("8000-"):]
	r = h.want(emutest.Via(t, h.srv.URL, other, "GET", "/", TrafficTokenHeader, tok), 502)
	var closed struct{ SandboxID, Message, Port string }
	r.Decode(t, &closed)
	if closed.SandboxID != id || closed.Port != "3000" || closed.Message == "" {
		t.Fatalf("port closed answered %s", r.Body)
	}

	emutest.CheckWebSocket(t, h.srv.URL, host, "/sockets/events/c1", http.Header{TrafficTokenHeader: {tok}})
	emutest.CheckStreams(t, a, h.srv.URL, host, TrafficTokenHeader, tok)

	// Paused: refused, not woken; the token still checks first.
	h.want(h.call("POST", "/sandboxes/"+id+"/pause", ""), 204)
	h.wantError(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", TrafficTokenHeader, tok), 502, "not running")
	h.wantError(emutest.Via(t, h.srv.URL, host, "GET", "/server_info"), 403, "traffic access token")
	if d := h.detail(id); d.State != StatePaused {
		t.Fatalf("traffic woke a sandbox without autoResume: %s", d.State)
	}
	// The token is the same after a resume (HMAC of the id).
	var c Created
	h.want(h.call("POST", "/sandboxes/"+id+"/connect", `{"timeout":600}`), 201).Decode(t, &c)
	if c.TrafficAccessToken != tok {
		t.Fatal("the traffic token changed across pause and resume")
	}
	h.want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", TrafficTokenHeader, tok), 200)
}

// A paused sandbox created with autoResume is woken by traffic that
// carries its token, with at least five minutes to live.
func TestProxyAutoResumes(t *testing.T) {
	h, _ := proxied(t, Options{})
	id, host, tok := h.private(`,"autoPause":true,"autoResume":{"enabled":true}`)
	h.want(h.call("POST", "/sandboxes/"+id+"/pause", ""), 204)
	h.s.Clock().Advance(time.Hour)

	h.wantError(emutest.Via(t, h.srv.URL, host, "GET", "/server_info"), 403, "traffic access token")
	if d := h.detail(id); d.State != StatePaused {
		t.Fatalf("traffic without the token woke the sandbox: %s", d.State)
	}
	h.want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", TrafficTokenHeader, tok), 200)
	d := h.detail(id)
	if d.State != StateRunning || d.EndAt.Sub(h.s.Clock().Now()) != autoResumeTimeout {
		t.Fatalf("after traffic: %s, %v to live; want running, 5m", d.State, d.EndAt.Sub(h.s.Clock().Now()))
	}
}

// Without an AgentServer the proxy answers /server_info itself and the
// port-closed 502 for anything else.
func TestProxyWithoutAgentServer(t *testing.T) {
	h := newHarness(t, Options{})
	u, _ := url.Parse(h.srv.URL)
	h.s.SetDomain("localhost:" + u.Port())
	_, host, tok := h.private("")
	var info struct{ Version string }
	h.want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", TrafficTokenHeader, tok), 200).Decode(t, &info)
	if info.Version != "emulated" {
		t.Fatalf("server_info %+v", info)
	}
	h.want(emutest.Via(t, h.srv.URL, host, "GET", "/api/conversations/search", TrafficTokenHeader, tok), 502)
}

func TestEndpoint(t *testing.T) {
	h, _ := proxied(t, Options{Admin: true})
	id, host, tok := h.private("")
	ep, err := h.s.Endpoint(id, 8000)
	if err != nil || ep.URL != "http://"+host || ep.Headers[TrafficTokenHeader] != tok {
		t.Fatalf("Endpoint = %+v, %v; want %s with the traffic token", ep, err, host)
	}
	var admin struct {
		URL     string
		Headers map[string]string
	}
	r := h.want(h.call("GET", "/_emulator/sandboxes/"+id+"/endpoint?port=3000", "", "X-API-Key", ""), 200)
	if err := json.Unmarshal(r.Body, &admin); err != nil {
		t.Fatal(err)
	}
	if admin.URL != "http://3000-"+host[len("8000-"):] || admin.Headers[TrafficTokenHeader] != tok {
		t.Fatalf("admin endpoint %+v", admin)
	}
	public := h.create(`{"templateID":"base"}`)
	if ep, _ := h.s.Endpoint(public.SandboxID, 8000); len(ep.Headers) != 0 {
		t.Fatalf("a public sandbox's endpoint names headers %v", ep.Headers)
	}
	h.want(h.call("GET", "/_emulator/sandboxes/nope/endpoint", ""), 404)
}
