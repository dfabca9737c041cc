package daytona

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator/emutest"
)

// proxied is a harness whose preview proxy forwards port 8000 to a
// stand-in agent-server.
func proxied(t *testing.T) (*harness, *emutest.AgentStandIn) {
	t.Helper()
	a := emutest.NewAgentStandIn()
	h := newHarness(t, Options{AgentServer: a.For})
	t.Cleanup(a.Release) // before the server closes: it waits for open streams
	u, _ := url.Parse(h.srv.URL)
	h.s.SetProxy("http", "localhost:"+u.Port())
	return h, a
}

// preview asks the API for port 8000's preview URL and token.
func (h *harness) preview(id string) (host, token string) {
	h.t.Helper()
	var pv struct{ SandboxID, URL, Token string }
	h.c.Want(h.call("GET", "/api/sandbox/"+id+"/ports/8000/preview-url", ""), 200).Decode(h.t, &pv)
	if pv.SandboxID != id || len(pv.Token) != 32 {
		h.t.Fatalf("preview-url answered %+v", pv)
	}
	return emutest.Endpoint(h.t, h.srv.URL, pv.URL), pv.Token
}

func TestPreviewProxyReachesAgentServer(t *testing.T) {
	h, a := proxied(t)
	sb := h.s.Seed(SeedSandbox{Name: "reach"})
	host, tok := h.preview(sb.ID)

	r := emutest.Via(t, h.srv.URL, host, "GET", "/server_info", PreviewTokenHeader, tok, "X-Session-API-Key", "k")
	var info struct{ Title, Version string }
	h.c.Want(r, 200).Decode(t, &info)
	if info.Title != sb.ID || info.Version != emutest.Version {
		t.Fatalf("server_info from %+v, want the stand-in of %s", info, sb.ID)
	}
	if got := a.Last(sb.ID); got.Get(PreviewTokenHeader) != "" || got.Get("X-Session-API-Key") != "k" {
		t.Fatalf("the box saw token %q and session key %q; want the preview token consumed and the key passed", got.Get(PreviewTokenHeader), got.Get("X-Session-API-Key"))
	}
	// An API key as Bearer is accepted too, and stripped.
	h.c.Want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", "Authorization", "Bearer "+token), 200)
	if got := a.Last(sb.ID).Get("Authorization"); got != "" {
		t.Fatalf("the box saw Authorization %q", got)
	}
	h.c.Want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info"), 401)
	h.c.Want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", PreviewTokenHeader, "not-the-token"), 401)
	// Only port 8000 has the agent-server.
	other := "3000-" + sb.ID + host[len("8000-"+sb.ID):]
	h.c.Want(emutest.Via(t, h.srv.URL, other, "GET", "/", PreviewTokenHeader, tok), 502)

	emutest.CheckWebSocket(t, h.srv.URL, host, "/sockets/events/c1", http.Header{PreviewTokenHeader: {tok}})
	emutest.CheckStreams(t, a, h.srv.URL, host, PreviewTokenHeader, tok)

	h.call("POST", "/api/sandbox/"+sb.ID+"/stop", "")
	h.s.Clock().Advance(time.Minute)
	h.c.Want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", PreviewTokenHeader, tok), 502)
}

// Without an AgentServer the proxy answers /server_info itself and 502
// for anything else, as before.
func TestPreviewProxyWithoutAgentServer(t *testing.T) {
	h := newHarness(t, Options{})
	u, _ := url.Parse(h.srv.URL)
	h.s.SetProxy("http", "localhost:"+u.Port())
	sb := h.s.Seed(SeedSandbox{Name: "bare"})
	host, tok := h.preview(sb.ID)
	var info struct{ Version string }
	h.c.Want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", PreviewTokenHeader, tok), 200).Decode(t, &info)
	if info.Version != "emulated" {
		t.Fatalf("server_info %+v", info)
	}
	h.c.Want(emutest.Via(t, h.srv.URL, host, "GET", "/api/conversations/search", PreviewTokenHeader, tok), 502)
}

// box-endpoints.md §1: the token is regenerated on start (stop→start) and
// kept on resume-from-pause; an old token no longer opens the box.
func TestPreviewTokenRotation(t *testing.T) {
	h, _ := proxied(t)
	clock := h.s.Clock()
	sb := h.s.Seed(SeedSandbox{Name: "vm", SandboxClass: "linux-vm"})
	host, first := h.preview(sb.ID)
	if _, again := h.preview(sb.ID); again != first {
		t.Fatal("the token changed between two reads of a running box")
	}

	h.c.Want(h.call("POST", "/api/sandbox/"+sb.ID+"/pause", ""), 200)
	clock.Advance(time.Minute)
	h.sandbox("POST", "/api/sandbox/"+sb.ID+"/start", "", 200)
	clock.Advance(time.Minute)
	if h.state(sb.ID) != StateStarted {
		t.Fatalf("not resumed: %s", h.state(sb.ID))
	}
	if _, resumed := h.preview(sb.ID); resumed != first {
		t.Fatal("a resume from pause changed the preview token")
	}
	h.c.Want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", PreviewTokenHeader, first), 200)

	h.c.Want(h.call("POST", "/api/sandbox/"+sb.ID+"/stop", ""), 200)
	clock.Advance(time.Minute)
	stopped, _ := h.s.Endpoint(sb.ID, 8000)
	if stopped.Headers[PreviewTokenHeader] != first {
		t.Fatal("a stop alone changed the token")
	}
	h.sandbox("POST", "/api/sandbox/"+sb.ID+"/start", "", 200)
	clock.Advance(time.Minute)
	_, second := h.preview(sb.ID)
	if second == first {
		t.Fatal("a start from stopped kept the preview token")
	}
	h.c.Want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", PreviewTokenHeader, first), 401)
	h.c.Want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", PreviewTokenHeader, second), 200)

	// Archive and restore is a start too.
	h.c.Want(h.call("POST", "/api/sandbox/"+sb.ID+"/stop", ""), 200)
	clock.Advance(time.Minute)
	h.c.Want(h.call("POST", "/api/sandbox/"+sb.ID+"/archive", ""), 200)
	clock.Advance(time.Minute)
	h.sandbox("POST", "/api/sandbox/"+sb.ID+"/start", "", 200)
	clock.Advance(time.Minute)
	if _, third := h.preview(sb.ID); third == second {
		t.Fatal("a restore from archive kept the preview token")
	}
}

// A request open through the proxy refreshes activity every 50 s, so an
// open WebSocket keeps the box from auto-stopping; once it closes, the
// auto-stop counts from the last refresh.
func TestOpenRequestKeepsBoxAwake(t *testing.T) {
	h, a := proxied(t)
	clock := h.s.Clock()
	one := 1
	sb := h.s.Seed(SeedSandbox{Name: "long", AutoStopInterval: &one})
	host, tok := h.preview(sb.ID)

	done := make(chan emutest.Response)
	go func() { done <- emutest.Via(t, h.srv.URL, host, "GET", "/stream", PreviewTokenHeader, tok) }()
	waitFor(t, func() bool { return a.Last(sb.ID) != nil })
	opened := clock.Now()
	clock.Advance(10*time.Minute + 20*time.Second)
	if got, _ := h.s.Sandbox(sb.ID); got.State != StateStarted || !got.LastActivityAt.Equal(opened.Add(10*time.Minute)) {
		t.Fatalf("with a request open: state %s, last activity %v after open (want started, 10m)", got.State, got.LastActivityAt.Sub(opened))
	}
	a.Release()
	if r := <-done; r.Status != 200 {
		t.Fatalf("stream: %d", r.Status)
	}
	clock.Advance(30 * time.Second)
	if got, _ := h.s.Sandbox(sb.ID); got.State != StateStarted {
		t.Fatalf("stopped within a minute of the last refresh: %s", got.State)
	}
	clock.Advance(time.Minute)
	if got, _ := h.s.Sandbox(sb.ID); got.State != StateStopped {
		t.Fatalf("a minute after the request ended: %s, want stopped", got.State)
	}

	// X-Daytona-Skip-Last-Activity-Update opts out.
	h.sandbox("POST", "/api/sandbox/"+sb.ID+"/start", "", 200)
	clock.Advance(5 * time.Second)
	_, tok = h.preview(sb.ID)
	before, _ := h.s.Sandbox(sb.ID)
	clock.Advance(10 * time.Second)
	h.c.Want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", PreviewTokenHeader, tok, skipActivityHeader, "true"), 200)
	if after, _ := h.s.Sandbox(sb.ID); !after.LastActivityAt.Equal(before.LastActivityAt) {
		t.Fatal("a request that opted out moved the activity clock")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestEndpointAdminRoute(t *testing.T) {
	a := emutest.NewAgentStandIn()
	h := newHarness(t, Options{Admin: true, AgentServer: a.For})
	u, _ := url.Parse(h.srv.URL)
	h.s.SetProxy("http", "localhost:"+u.Port())
	sb := h.s.Seed(SeedSandbox{Name: "admin"})
	r := h.c.Want(h.call("GET", "/_emulator/sandboxes/"+sb.ID+"/endpoint", "", "Authorization", ""), 200)
	var ep struct {
		URL     string
		Headers map[string]string
	}
	if err := json.Unmarshal(r.Body, &ep); err != nil {
		t.Fatal(err)
	}
	host, tok := h.preview(sb.ID)
	if ep.URL != "http://"+host || ep.Headers[PreviewTokenHeader] != tok {
		t.Fatalf("admin endpoint %+v, want %s with the preview token", ep, host)
	}
	h.c.Want(h.call("GET", "/_emulator/sandboxes/"+sb.ID+"/endpoint?port=0", ""), 400)
	h.c.Want(h.call("GET", "/_emulator/sandboxes/nope/endpoint", ""), 404)
}
