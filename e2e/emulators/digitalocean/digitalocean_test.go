package digitalocean

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/e2e/emulators/emulator/emutest"
)

const tok = "dop_v1_testtoken"

var t0 = time.Date(2026, 10, 1, 8, 0, 0, 0, time.UTC)

type harness struct {
	t   *testing.T
	s   *Server
	srv *httptest.Server
	c   *emutest.Client
}

type response = emutest.Response

func (h *harness) call(method, path, body string, hdr ...string) response {
	h.t.Helper()
	return h.c.Call(method, path, body, hdr...)
}

func (h *harness) want(r response, status int) response {
	h.t.Helper()
	return h.c.Want(r, status)
}

func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	if o.Token == "" {
		o.Token = tok
	}
	if o.Clock == nil {
		o.Clock = emulator.NewFakeClock(t0)
	}
	s := New(o)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Close(); srv.Close() })
	c := &emutest.Client{T: t, URL: srv.URL, Header: "Authorization", Value: "Bearer " + tok, JSON: true}
	return &harness{t: t, s: s, srv: srv, c: c}
}

// wantEnvelope checks {error: {code, message}}.
func (h *harness) wantEnvelope(r response, status int, code, msgPart string) {
	h.t.Helper()
	h.want(r, status)
	var e struct {
		Error struct{ Code, Message string }
	}
	r.Decode(h.t, &e)
	if e.Error.Code != code || !strings.Contains(e.Error.Message, msgPart) {
		h.t.Fatalf("envelope %s: want code %s, message containing %q", r.Body, code, msgPart)
	}
}

// wantClassic checks {id, message, request_id}.
func (h *harness) wantClassic(r response, status int, id string) {
	h.t.Helper()
	h.want(r, status)
	var raw map[string]any
	r.Decode(h.t, &raw)
	if raw["id"] != id || raw["message"] == "" || raw["request_id"] == "" {
		h.t.Fatalf("classic error %s: want id %s", r.Body, id)
	}
}

func (h *harness) session(id string) Session {
	h.t.Helper()
	var v struct{ Session Session }
	h.want(h.call("GET", "/v2/agents/sessions/"+id, ""), 200).Decode(h.t, &v)
	return v.Session
}

func (h *harness) create(body string) Session {
	h.t.Helper()
	var v struct{ Session Session }
	h.want(h.call("POST", "/v2/agents/sessions", body), 201).Decode(h.t, &v)
	return v.Session
}

func TestLifecycle(t *testing.T) {
	h := newHarness(t, Options{})
	clock := h.s.Clock()
	s := h.create(`{"agent_kind":"openhands","repo_hint":"github.com/a/b","origin":"companion","name":"ws-1"}`)
	if !strings.HasPrefix(s.SessionID, "sess_") || s.Status != StatusProvisioning || s.AgentKind != "openhands" ||
		s.RepoHint != "github.com/a/b" || s.Name != "ws-1" || s.TeamID == "" || !s.CreatedAt.Equal(t0) {
		t.Fatalf("created: %+v", s)
	}
	r := h.call("GET", "/v2/agents/sessions/"+s.SessionID, "")
	if strings.Contains(string(r.Body), "idle_timeout_seconds") || strings.Contains(string(r.Body), "pause_reason") {
		t.Fatalf("default idle timeout / empty pause_reason not omitted: %s", r.Body)
	}
	h.wantEnvelope(h.call("POST", "/v2/agents/sessions/"+s.SessionID+"/pause", ""), 409, "FAILED_PRECONDITION", "PROVISIONING")

	clock.Advance(5 * time.Second)
	if got := h.session(s.SessionID); got.Status != StatusReady || !got.LastEventAt.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("ready: %+v", got)
	}

	clock.Advance(time.Minute)
	h.want(h.call("POST", "/v2/agents/sessions/"+s.SessionID+"/pause", ""), 204)
	got := h.session(s.SessionID)
	if got.Status != StatusPaused || got.PauseReason != PauseManual || !got.LastEventAt.Equal(clock.Now()) {
		t.Fatalf("paused: %+v", got)
	}
	h.wantEnvelope(h.call("POST", "/v2/agents/sessions/"+s.SessionID+"/pause", ""), 409, "FAILED_PRECONDITION", "PAUSED")

	h.want(h.call("POST", "/v2/agents/sessions/"+s.SessionID+"/resume", ""), 204)
	if got := h.session(s.SessionID); got.Status != StatusProvisioning || got.PauseReason != "" {
		t.Fatalf("resuming: %+v", got)
	}
	h.wantEnvelope(h.call("POST", "/v2/agents/sessions/"+s.SessionID+"/resume", ""), 409, "FAILED_PRECONDITION", "PAUSED")
	clock.Advance(3 * time.Second)
	if got := h.session(s.SessionID); got.Status != StatusReady {
		t.Fatalf("resumed: %s", got.Status)
	}

	h.want(h.call("DELETE", "/v2/agents/sessions/"+s.SessionID, ""), 204)
	if got := h.session(s.SessionID); got.Status != StatusDestroying {
		t.Fatalf("deleting: %s", got.Status)
	}
	clock.Advance(2 * time.Second)
	if got := h.session(s.SessionID); got.Status != StatusDestroyed {
		t.Fatalf("destroyed: %s", got.Status)
	}
	h.want(h.call("DELETE", "/v2/agents/sessions/"+s.SessionID, ""), 204)
	var page struct{ Sessions []Session }
	h.want(h.call("GET", "/v2/agents/sessions", ""), 200).Decode(t, &page)
	if len(page.Sessions) != 0 {
		t.Fatalf("destroyed session in default list: %+v", page.Sessions)
	}
	h.want(h.call("GET", "/v2/agents/sessions?status=SESSION_STATUS_ALL", ""), 200).Decode(t, &page)
	if len(page.Sessions) != 1 {
		t.Fatalf("ALL: %d sessions", len(page.Sessions))
	}
	h.wantEnvelope(h.call("POST", "/v2/agents/sessions/"+s.SessionID+"/resume", ""), 409, "FAILED_PRECONDITION", "DESTROYED")
}

func TestIdleAutoPause(t *testing.T) {
	h := newHarness(t, Options{Delays: &Delays{}})
	clock := h.s.Clock()
	def := h.create(`{"agent_kind":"openhands"}`)                            // deployment default: 15 min
	own := h.create(`{"agent_kind":"openhands","idle_timeout_seconds":120}`) // its own
	warm := h.create(`{"agent_kind":"openhands","keep_warm":true}`)
	if own.IdleTimeoutSeconds != 120 || def.Status != StatusReady {
		t.Fatalf("created: %+v %+v", own, def)
	}

	clock.Advance(90 * time.Second)
	h.want(h.call("POST", "/v2/agents/sessions/"+own.SessionID+"/input", `{"text":"hi"}`), 202)
	clock.Advance(119 * time.Second)
	if got := h.session(own.SessionID); got.Status != StatusReady {
		t.Fatalf("input did not reset the idle clock: %s", got.Status)
	}
	clock.Advance(time.Second)
	got := h.session(own.SessionID)
	pausedAt := t0.Add(90*time.Second + 120*time.Second)
	if got.Status != StatusPaused || got.PauseReason != PauseIdle || !got.LastEventAt.Equal(pausedAt) {
		t.Fatalf("idle pause: %+v (want paused at %v)", got, pausedAt)
	}

	clock.Set(t0.Add(15*time.Minute - time.Second))
	if got := h.session(def.SessionID); got.Status != StatusReady {
		t.Fatalf("default-timeout session paused early: %s", got.Status)
	}
	if err := h.s.Touch(def.SessionID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(15 * time.Minute)
	if got := h.session(def.SessionID); got.Status != StatusPaused || got.PauseReason != PauseIdle {
		t.Fatalf("default idle pause: %+v", got)
	}
	if err := h.s.Touch(def.SessionID); err == nil {
		t.Fatal("Touch on a paused session succeeded")
	}

	clock.Advance(24 * time.Hour)
	if got := h.session(warm.SessionID); got.Status != StatusReady {
		t.Fatalf("keep_warm session paused: %s", got.Status)
	}
	h.wantEnvelope(h.call("POST", "/v2/agents/sessions/"+warm.SessionID+"/pause", ""), 409, "FAILED_PRECONDITION", "keep_warm")

	// DETACHED sessions idle out too; a never-idle deployment leaves them.
	det := h.s.Seed(Session{Status: StatusDetached})
	clock.Advance(15 * time.Minute)
	if got, _ := h.s.Session(det.SessionID); got.Status != StatusPaused {
		t.Fatalf("detached: %s", got.Status)
	}
	never := newHarness(t, Options{DefaultIdleTimeout: -1})
	n := never.s.Seed(Session{})
	never.s.Clock().Advance(1000 * time.Hour)
	if got, _ := never.s.Session(n.SessionID); got.Status != StatusReady {
		t.Fatalf("never-idle deployment paused: %s", got.Status)
	}
}

func TestConfigs(t *testing.T) {
	h := newHarness(t, Options{KeepWarmByDefault: true})
	manifest := "agent: openhands\ntemplate: openhands\nkeep_warm: false\nsandbox:\n  idleTimeoutSeconds: 600 # ten minutes\n"
	var cv struct{ Config Config }
	h.want(h.call("POST", "/v2/agents/configs", fmt.Sprintf(`{"name":"oh","manifest_yaml":%q}`, manifest)), 201).Decode(t, &cv)
	if cv.Config.ConfigID == "" || cv.Config.Name != "oh" {
		t.Fatalf("config: %+v", cv.Config)
	}
	h.wantEnvelope(h.call("POST", "/v2/agents/configs", fmt.Sprintf(`{"name":"oh","manifest_yaml":%q}`, manifest)), 409, "FAILED_PRECONDITION", "already exists")
	h.wantEnvelope(h.call("POST", "/v2/agents/configs", `{"name":"bad","manifest_yaml":"template: x\n"}`), 400, "INVALID_ARGUMENT", "agent is required")

	s := h.create(fmt.Sprintf(`{"name":"from-config","config_id":%q}`, cv.Config.ConfigID))
	if s.ConfigID != cv.Config.ConfigID || s.AgentKind != "openhands" || s.KeepWarm || s.IdleTimeoutSeconds != 600 {
		t.Fatalf("session from config: %+v", s)
	}
	direct := h.create(`{"agent_kind":"codex"}`)
	if !direct.KeepWarm {
		t.Fatal("KeepWarmByDefault not applied")
	}

	var cs struct{ Sessions []Session }
	h.want(h.call("GET", "/v2/agents/configs/"+cv.Config.ConfigID+"/sessions", ""), 200).Decode(t, &cs)
	if len(cs.Sessions) != 1 || cs.Sessions[0].SessionID != s.SessionID {
		t.Fatalf("config sessions: %+v", cs.Sessions)
	}
	var list struct{ Configs []Config }
	h.want(h.call("GET", "/v2/agents/configs", ""), 200).Decode(t, &list)
	if len(list.Configs) != 1 {
		t.Fatalf("configs: %+v", list.Configs)
	}
	h.want(h.call("DELETE", "/v2/agents/configs/"+cv.Config.ConfigID, ""), 204)
	h.wantEnvelope(h.call("GET", "/v2/agents/configs/"+cv.Config.ConfigID, ""), 404, "NOT_FOUND", "not found")
	h.wantEnvelope(h.call("POST", "/v2/agents/sessions", fmt.Sprintf(`{"config_id":%q}`, cv.Config.ConfigID)), 404, "NOT_FOUND", "config")
	if got := h.session(s.SessionID); got.ConfigID != cv.Config.ConfigID {
		t.Fatal("soft-deleting the config changed its session")
	}

	// A YAML manifest body creates a session directly.
	r := h.call("POST", "/v2/agents/sessions", "agent: claude-code\nname: yaml-one\n", "Content-Type", "application/x-yaml")
	var v struct{ Session Session }
	h.want(r, 201).Decode(t, &v)
	if v.Session.AgentKind != "claude-code" || v.Session.Name != "yaml-one" {
		t.Fatalf("yaml session: %+v", v.Session)
	}
	h.wantEnvelope(h.call("POST", "/v2/agents/sessions", `{}`), 400, "INVALID_ARGUMENT", "agent_kind")
	h.wantEnvelope(h.call("POST", "/v2/agents/sessions", `{"agent_kind":"x","idle_timeout_seconds":-5}`), 400, "INVALID_ARGUMENT", "idle_timeout")
	h.wantEnvelope(h.call("POST", "/v2/agents/sessions", "x", "Content-Type", "text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE", "")
}

func TestPagination(t *testing.T) {
	h := newHarness(t, Options{DefaultIdleTimeout: -1})
	ids := map[string]bool{}
	for i := range 11 {
		st := StatusReady
		if i%4 == 0 {
			st = StatusPaused
		}
		s := h.s.Seed(Session{Status: st, CreatedAt: t0.Add(-time.Duration(i) * time.Minute)})
		ids[s.SessionID] = true
	}
	h.s.Seed(Session{Status: StatusDestroyed, CreatedAt: t0.Add(-time.Hour)})

	var all []Session
	q := "page_size=4"
	pages := 0
	for {
		var v struct {
			Sessions      []Session `json:"sessions"`
			NextPageToken string    `json:"next_page_token"`
		}
		h.want(h.call("GET", "/v2/agents/sessions?"+q, ""), 200).Decode(t, &v)
		pages++
		all = append(all, v.Sessions...)
		if v.NextPageToken == "" {
			break
		}
		q = "page_size=4&page_token=" + url.QueryEscape(v.NextPageToken)
	}
	if pages != 3 || len(all) != 11 {
		t.Fatalf("%d sessions over %d pages, want 11 over 3", len(all), pages)
	}
	for i, s := range all {
		if !ids[s.SessionID] {
			t.Fatalf("repeated or unexpected %s (%s)", s.SessionID, s.Status)
		}
		delete(ids, s.SessionID)
		if i > 0 && !s.CreatedAt.Before(all[i-1].CreatedAt) {
			t.Fatalf("not newest first at %d", i)
		}
	}
	count := func(q string) int {
		var v struct{ Sessions []Session }
		h.want(h.call("GET", "/v2/agents/sessions?"+q, ""), 200).Decode(t, &v)
		return len(v.Sessions)
	}
	if n := count("status=SESSION_STATUS_PAUSED"); n != 3 {
		t.Fatalf("paused: %d", n)
	}
	if n := count("status=SESSION_STATUS_PAUSED,SESSION_STATUS_DESTROYED"); n != 4 {
		t.Fatalf("paused+destroyed: %d", n)
	}
	if n := count("page_size=1000"); n != 11 {
		t.Fatalf("page_size clamp: %d", n)
	}
	h.wantEnvelope(h.call("GET", "/v2/agents/sessions?status=READY", ""), 400, "INVALID_ARGUMENT", "status")
	h.wantEnvelope(h.call("GET", "/v2/agents/sessions?page_token=bogus", ""), 400, "INVALID_ARGUMENT", "page_token")
	h.wantEnvelope(h.call("GET", "/v2/agents/sessions?page_size=-1", ""), 400, "INVALID_ARGUMENT", "page_size")
}

func TestAuthAndErrorStyles(t *testing.T) {
	h := newHarness(t, Options{})
	h.wantClassic(h.call("GET", "/v2/agents/sessions", "", "Authorization", ""), 401, "unauthorized")
	h.wantClassic(h.call("GET", "/v2/agents/sessions", "", "Authorization", "Bearer wrong"), 401, "unauthorized")
	h.wantClassic(h.call("GET", "/v2/agents/sessions", "", "Authorization", "", "X-API-Key", tok), 401, "unauthorized")
	h.wantEnvelope(h.call("GET", "/v2/agents/sessions/sess_nope", ""), 404, "NOT_FOUND", "sess_nope")
	h.wantEnvelope(h.call("POST", "/v2/agents/sessions/sess_nope/pause", ""), 404, "NOT_FOUND", "sess_nope")
	h.wantEnvelope(h.call("DELETE", "/v2/agents/sessions/sess_nope", ""), 404, "NOT_FOUND", "sess_nope")
	raw, _ := json.Marshal(h.s.Requests().All())
	if strings.Contains(string(raw), tok) || strings.Contains(string(raw), "wrong") {
		t.Fatal("request log holds a token")
	}

	classic := newHarness(t, Options{ErrorStyle: ErrorsClassic})
	classic.wantClassic(classic.call("GET", "/v2/agents/sessions/sess_nope", ""), 404, "not_found")
	env := newHarness(t, Options{ErrorStyle: ErrorsEnvelope})
	env.wantEnvelope(env.call("GET", "/v2/agents/sessions", "", "Authorization", ""), 401, "UNAUTHENTICATED", "authenticate")
}

func TestRateLimitHeadersAndFaults(t *testing.T) {
	h := newHarness(t, Options{})
	r := h.want(h.call("GET", "/v2/agents/sessions", ""), 200)
	if r.Header.Get("ratelimit-limit") != "5000" || r.Header.Get("ratelimit-remaining") != "4999" ||
		r.Header.Get("ratelimit-reset") != strconv.FormatInt(t0.Add(time.Hour).Unix(), 10) {
		t.Fatalf("ratelimit headers: %v", r.Header)
	}
	h.s.Faults().RateLimit(1, 20*time.Second)
	r = h.call("GET", "/v2/agents/sessions", "")
	h.wantClassic(r, 429, "too_many_requests")
	if r.Header.Get("Retry-After") != "20" || r.Header.Get("ratelimit-remaining") != "0" ||
		r.Header.Get("ratelimit-reset") != strconv.FormatInt(t0.Add(20*time.Second).Unix(), 10) {
		t.Fatalf("429 headers: %v", r.Header)
	}
	h.s.Faults().Fail(1, 500)
	h.s.Faults().Fail(1, 503)
	h.wantEnvelope(h.call("POST", "/v2/agents/sessions", `{"agent_kind":"x"}`), 500, "INTERNAL", "")
	h.wantEnvelope(h.call("GET", "/v2/agents/sessions", ""), 503, "UNAVAILABLE", "")
	if len(h.s.Sessions()) != 0 {
		t.Fatal("a faulted create made a session")
	}

	enf := newHarness(t, Options{EnforceRateLimits: true})
	for range 250 {
		enf.want(enf.call("GET", "/v2/agents/sessions", ""), 200)
	}
	r = enf.call("GET", "/v2/agents/sessions", "")
	enf.wantClassic(r, 429, "too_many_requests")
	if r.Header.Get("Retry-After") != "60" {
		t.Fatalf("per-minute Retry-After: %q", r.Header.Get("Retry-After"))
	}
	enf.s.Clock().Advance(time.Minute)
	enf.want(enf.call("GET", "/v2/agents/sessions", ""), 200)
}

func TestAdmin(t *testing.T) {
	h := newHarness(t, Options{Admin: true})
	r := h.want(h.call("POST", "/_emulator/seed", `{"session_id":"sess_adopt","name":"old","status":"SESSION_STATUS_READY"}`, "Authorization", ""), 201)
	var s Session
	r.Decode(t, &s)
	if s.SessionID != "sess_adopt" || s.TeamID == "" {
		t.Fatalf("seeded: %+v", s)
	}
	h.want(h.call("POST", "/_emulator/clock", `{"advance":"14m"}`), 200)
	h.want(h.call("POST", "/_emulator/sessions/sess_adopt/event", ""), 204)
	h.want(h.call("POST", "/_emulator/clock", `{"advance":"14m"}`), 200)
	var st struct{ Sessions []Session }
	h.want(h.call("GET", "/_emulator/state", ""), 200).Decode(t, &st)
	if len(st.Sessions) != 1 || st.Sessions[0].Status != StatusReady {
		t.Fatalf("state: %+v", st.Sessions)
	}
	h.want(h.call("POST", "/_emulator/clock", `{"advance":"1m"}`), 200)
	h.want(h.call("GET", "/_emulator/state", ""), 200).Decode(t, &st)
	if st.Sessions[0].Status != StatusPaused {
		t.Fatalf("not idle-paused: %s", st.Sessions[0].Status)
	}
	h.want(h.call("POST", "/_emulator/sessions/sess_adopt/event", ""), 409)
	if n := len(h.s.Requests().All()); n != 0 {
		t.Fatalf("admin calls logged: %d", n)
	}
}

func TestClockJumpReplaysChain(t *testing.T) {
	h := newHarness(t, Options{})
	s := h.create(`{"agent_kind":"openhands"}`)
	h.s.Clock().Advance(24 * time.Hour)
	got := h.session(s.SessionID)
	// READY after 5 s of provisioning, idle-paused 15 min after that event.
	want := t0.Add(5*time.Second + 15*time.Minute)
	if got.Status != StatusPaused || got.PauseReason != PauseIdle || !got.LastEventAt.Equal(want) {
		t.Fatalf("after a day: %+v, want idle-paused at %v", got, want)
	}
}

// TestInactivityDestroy: with the inactivity policy on, a session idle
// longer than it is destroyed, after its idle pause and whether paused or
// not; an event moves the deadline; keep_warm does not save it.
func TestInactivityDestroy(t *testing.T) {
	h := newHarness(t, Options{Delays: &Delays{}, DefaultIdleTimeout: 10 * time.Minute, InactivityDestroy: time.Hour})
	clock := h.s.Clock()
	idle := h.create(`{"agent_kind":"openhands"}`)
	warm := h.create(`{"agent_kind":"openhands","keep_warm":true}`)

	clock.Advance(10 * time.Minute)
	if got := h.session(idle.SessionID); got.Status != StatusPaused {
		t.Fatalf("idle pause first: %s", got.Status)
	}
	clock.Advance(59 * time.Minute)
	if got := h.session(idle.SessionID); got.Status != StatusPaused {
		t.Fatalf("destroyed before an hour from its pause: %s", got.Status)
	}
	if got := h.session(warm.SessionID); got.Status != StatusDestroyed {
		t.Fatalf("keep_warm session idle 69 min: %s, want destroyed", got.Status)
	}
	clock.Advance(time.Minute)
	if got := h.session(idle.SessionID); got.Status != StatusDestroyed {
		t.Fatalf("paused session an hour after its pause: %s, want destroyed", got.Status)
	}

	h.s.SetInactivityDestroy(0)
	kept := h.create(`{"agent_kind":"openhands"}`)
	clock.Advance(48 * time.Hour)
	if got := h.session(kept.SessionID); got.Status != StatusPaused {
		t.Fatalf("policy off: %s, want paused and kept", got.Status)
	}
}
