package digitalocean

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator/emutest"
)

// proxied is a harness whose ingress forwards to a stand-in agent-server.
func proxied(t *testing.T) (*harness, *emutest.AgentStandIn) {
	t.Helper()
	a := emutest.NewAgentStandIn()
	h := newHarness(t, Options{AgentServer: a.For, Delays: &Delays{Resume: 3 * time.Second}})
	t.Cleanup(a.Release) // before the server closes: it waits for open streams
	u, _ := url.Parse(h.srv.URL)
	h.s.SetIngressDomain("http", "localhost:"+u.Port())
	return h, a
}

type ingressURL struct {
	IngressURLID string `json:"ingress_url_id"`
	SessionID    string `json:"session_id"`
	Port         int
	URL          string
	State        string
	CreatedAt    time.Time `json:"created_at"`
}

// ingress reads the session's ingress URL through the API.
func (h *harness) ingress(id string) ingressURL {
	h.t.Helper()
	var v struct {
		IngressURL ingressURL `json:"ingress_url"`
	}
	h.want(h.call("GET", "/v2/agents/sessions/"+id+"/ingress", ""), 200).Decode(h.t, &v)
	if v.IngressURL.SessionID != id || v.IngressURL.Port != 8000 || v.IngressURL.State != "INGRESS_URL_STATE_READY" {
		h.t.Fatalf("ingress %+v", v.IngressURL)
	}
	return v.IngressURL
}

func TestIngressReachesAgentServer(t *testing.T) {
	h, a := proxied(t)
	s := h.s.Seed(Session{Name: "reach"})
	ing := h.ingress(s.SessionID)
	host := emutest.Endpoint(t, h.srv.URL, ing.URL)
	bearer := "Bearer " + tok

	r := emutest.Via(t, h.srv.URL, host, "GET", "/server_info", "Authorization", bearer, "X-Session-API-Key", "k")
	var info struct{ Title, Version string }
	h.want(r, 200).Decode(t, &info)
	if info.Title != s.SessionID || info.Version != emutest.Version {
		t.Fatalf("server_info %+v, want the stand-in of %s", info, s.SessionID)
	}
	if got := a.Last(s.SessionID).Get("X-Session-API-Key"); got != "k" {
		t.Fatalf("the session key did not pass: %q", got)
	}
	h.wantClassic(emutest.Via(t, h.srv.URL, host, "GET", "/server_info"), 401, "unauthorized")
	h.wantClassic(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", "Authorization", "Bearer nope"), 401, "unauthorized")
	h.want(emutest.Via(t, h.srv.URL, "neverpublished."+strings.SplitN(host, ".", 2)[1], "GET", "/server_info", "Authorization", bearer), 404)

	emutest.CheckWebSocket(t, h.srv.URL, host, "/sockets/events/c1", http.Header{"Authorization": {bearer}})
	emutest.CheckStreams(t, a, h.srv.URL, host, "Authorization", bearer)

	// The same URL until a pause.
	h.s.Clock().Advance(time.Minute)
	if again := h.ingress(s.SessionID); again != ing {
		t.Fatalf("the ingress changed without a pause: %+v → %+v", ing, again)
	}
}

// box-endpoints.md §3b: "The same URL is returned until pause, lock or
// rollback. Pause and lock revoke it; afterwards a new hostname is issued."
func TestIngressRevokedByPauseRenewedAfterResume(t *testing.T) {
	h, _ := proxied(t)
	clock := h.s.Clock()
	s := h.s.Seed(Session{Name: "rotate"})
	old := h.ingress(s.SessionID)
	oldHost := emutest.Endpoint(t, h.srv.URL, old.URL)
	bearer := "Bearer " + tok

	h.want(h.call("POST", "/v2/agents/sessions/"+s.SessionID+"/pause", ""), 204)
	h.wantEnvelope(emutest.Via(t, h.srv.URL, oldHost, "GET", "/server_info", "Authorization", bearer), 404, "NOT_FOUND", "ingress")
	h.wantEnvelope(h.call("GET", "/v2/agents/sessions/"+s.SessionID+"/ingress", ""), 409, "FAILED_PRECONDITION", "PAUSED")

	h.want(h.call("POST", "/v2/agents/sessions/"+s.SessionID+"/resume", ""), 204)
	h.wantEnvelope(h.call("GET", "/v2/agents/sessions/"+s.SessionID+"/ingress", ""), 409, "FAILED_PRECONDITION", "PROVISIONING")
	clock.Advance(3 * time.Second)
	fresh := h.ingress(s.SessionID)
	freshHost := emutest.Endpoint(t, h.srv.URL, fresh.URL)
	if freshHost == oldHost || fresh.IngressURLID == old.IngressURLID || !fresh.CreatedAt.After(old.CreatedAt) {
		t.Fatalf("after resume the ingress is %+v, was %+v; want a new hostname", fresh, old)
	}
	h.want(emutest.Via(t, h.srv.URL, freshHost, "GET", "/server_info", "Authorization", bearer), 200)
	h.want(emutest.Via(t, h.srv.URL, oldHost, "GET", "/server_info", "Authorization", bearer), 404)

	// An idle pause revokes it too.
	clock.Advance(time.Hour)
	if got := h.session(s.SessionID); got.Status != StatusPaused || got.PauseReason != PauseIdle {
		t.Fatalf("not idle-paused: %+v", got)
	}
	h.want(emutest.Via(t, h.srv.URL, freshHost, "GET", "/server_info", "Authorization", bearer), 404)

	// A lock (a staff action, set here through Update) revokes it.
	locked := h.s.Seed(Session{Name: "locked"})
	ep, err := h.s.Endpoint(locked.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	h.s.Update(locked.SessionID, func(s *Session) { s.Status = StatusLocked })
	h.want(emutest.Via(t, h.srv.URL, emutest.Endpoint(t, h.srv.URL, ep.URL), "GET", "/server_info", "Authorization", bearer), 404)
	if _, err := h.s.Endpoint(locked.SessionID); err == nil {
		t.Fatal("a locked session has an endpoint")
	}
}

// Without an AgentServer the ingress answers /server_info itself and 502
// for anything else.
func TestIngressWithoutAgentServer(t *testing.T) {
	h := newHarness(t, Options{Admin: true})
	u, _ := url.Parse(h.srv.URL)
	h.s.SetIngressDomain("http", "localhost:"+u.Port())
	s := h.s.Seed(Session{Name: "bare"})
	// The admin route publishes it as the API's first call would.
	var ep struct{ URL string }
	h.want(h.call("GET", "/_emulator/sessions/"+s.SessionID+"/endpoint", "", "Authorization", ""), 200).Decode(t, &ep)
	if ep.URL != h.ingress(s.SessionID).URL {
		t.Fatalf("admin endpoint %s differs from the API's", ep.URL)
	}
	host := emutest.Endpoint(t, h.srv.URL, ep.URL)
	var info struct{ Version string }
	h.want(emutest.Via(t, h.srv.URL, host, "GET", "/server_info", "Authorization", "Bearer "+tok), 200).Decode(t, &info)
	if info.Version != "emulated" {
		t.Fatalf("server_info %+v", info)
	}
	h.want(emutest.Via(t, h.srv.URL, host, "GET", "/api/conversations/search", "Authorization", "Bearer "+tok), 502)
	h.want(h.call("GET", "/_emulator/sessions/sess_nope/endpoint", ""), 404)
}
