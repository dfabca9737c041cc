package daytona

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/e2e/emulators/emulator/emutest"
)

const token = "dtn_test_key_1234567890"

var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

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

func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	if o.Token == "" {
		o.Token = token
	}
	if o.Clock == nil {
		o.Clock = emulator.NewFakeClock(t0)
	}
	s := New(o)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Close(); srv.Close() })
	c := &emutest.Client{T: t, URL: srv.URL, Header: "Authorization", Value: "Bearer " + token, JSON: true}
	return &harness{t: t, s: s, srv: srv, c: c}
}

func (h *harness) sandbox(method, path, body string, want int) Sandbox {
	h.t.Helper()
	r := h.call(method, path, body)
	if r.Status != want {
		h.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	var sb Sandbox
	r.Decode(h.t, &sb)
	return sb
}

func (h *harness) state(id string) string {
	h.t.Helper()
	return h.sandbox("GET", "/api/sandbox/"+id, "", 200).State
}

type apiError struct {
	Path       string `json:"path"`
	Timestamp  string `json:"timestamp"`
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
	Message    string `json:"message"`
	Code       string `json:"code"`
}

func (h *harness) wantError(r response, status int, msgPart string) apiError {
	h.t.Helper()
	if r.Status != status {
		h.t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	var e apiError
	r.Decode(h.t, &e)
	if e.StatusCode != status || e.Error != http.StatusText(status) || e.Path == "" || e.Timestamp == "" {
		h.t.Fatalf("error body not in Daytona's shape: %s", r.Body)
	}
	if !strings.Contains(e.Message, msgPart) {
		h.t.Fatalf("message %q does not contain %q", e.Message, msgPart)
	}
	return e
}

func TestLifecycle(t *testing.T) {
	h := newHarness(t, Options{})
	clock := h.s.Clock()

	sb := h.sandbox("POST", "/api/sandbox", `{"name":"ws-1","labels":{"companion.workspace":"w1"},"autoArchiveInterval":60}`, 200)
	if sb.State != StateCreating || sb.DesiredState != StateStarted {
		t.Fatalf("new sandbox: state %q desired %q", sb.State, sb.DesiredState)
	}
	if sb.AutoStopInterval != 15 || sb.AutoArchiveInterval != 60 || sb.AutoDeleteInterval != -1 {
		t.Fatalf("intervals: %d %d %d", sb.AutoStopInterval, sb.AutoArchiveInterval, sb.AutoDeleteInterval)
	}
	if sb.Labels["companion.workspace"] != "w1" || sb.Name != "ws-1" || !sb.CreatedAt.Equal(t0) {
		t.Fatalf("sandbox: %+v", sb)
	}
	clock.Advance(time.Second)
	if got := h.state(sb.ID); got != StateCreating {
		t.Fatalf("after 1s: %s", got)
	}
	clock.Advance(time.Second)
	if got := h.state("ws-1"); got != StateStarted { // by name, too
		t.Fatalf("after 2s: %s", got)
	}

	if r := h.call("POST", "/api/sandbox/"+sb.ID+"/stop", ""); r.Status != 200 {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	if got := h.state(sb.ID); got != StateStopping {
		t.Fatalf("after stop: %s", got)
	}
	clock.Advance(2 * time.Second)
	if got := h.state(sb.ID); got != StateStopped {
		t.Fatalf("stopped: %s", got)
	}

	if r := h.call("POST", "/api/sandbox/"+sb.ID+"/archive", ""); r.Status != 200 {
		t.Fatalf("archive: %d %s", r.Status, r.Body)
	}
	clock.Advance(5 * time.Second)
	if got := h.state(sb.ID); got != StateArchived {
		t.Fatalf("archived: %s", got)
	}

	started := h.sandbox("POST", "/api/sandbox/"+sb.ID+"/start", "", 200)
	if started.State != StateRestoring {
		t.Fatalf("start from archived: %s", started.State)
	}
	clock.Advance(10 * time.Second)
	if got := h.state(sb.ID); got != StateStarted {
		t.Fatalf("restored: %s", got)
	}
	// Starting a started box is a no-op that returns it.
	if again := h.sandbox("POST", "/api/sandbox/"+sb.ID+"/start", "", 200); again.State != StateStarted {
		t.Fatalf("start again: %s", again.State)
	}

	del := h.sandbox("DELETE", "/api/sandbox/"+sb.ID, "", 200)
	if del.State != StateDestroying || del.DesiredState != StateDestroyed {
		t.Fatalf("delete answer: %s / %s", del.State, del.DesiredState)
	}
	clock.Advance(time.Second)
	h.wantError(h.call("GET", "/api/sandbox/"+sb.ID, ""), 404, "not found")
	var list struct{ Items []Sandbox }
	h.call("GET", "/api/sandbox", "").Decode(t, &list)
	if len(list.Items) != 0 {
		t.Fatalf("destroyed sandbox still listed: %+v", list.Items)
	}
}

func TestPagination(t *testing.T) {
	h := newHarness(t, Options{})
	ids := map[string]bool{}
	for i := range 7 {
		labels := map[string]string{"n": fmt.Sprint(i % 2)}
		sb := h.s.Seed(SeedSandbox{CreatedAt: t0.Add(-time.Duration(i) * time.Hour), LastActivityAt: t0, Labels: labels})
		ids[sb.ID] = true
	}
	h.s.Seed(SeedSandbox{State: StateStopped, CreatedAt: t0.Add(-10 * time.Hour)})

	page := func(q string) (items []Sandbox, next *string) {
		t.Helper()
		r := h.call("GET", "/api/sandbox?"+q, "")
		if r.Status != 200 {
			t.Fatalf("list %s: %d %s", q, r.Status, r.Body)
		}
		var v struct {
			Items      []Sandbox `json:"items"`
			NextCursor *string   `json:"nextCursor"`
		}
		r.Decode(t, &v)
		if !strings.Contains(string(r.Body), `"nextCursor"`) {
			t.Fatalf("nextCursor missing from %s", r.Body)
		}
		return v.Items, v.NextCursor
	}

	var all []Sandbox
	q := "limit=3&states=started"
	pages := 0
	for {
		items, next := page(q)
		pages++
		all = append(all, items...)
		if next == nil {
			break
		}
		q = "limit=3&states=started&cursor=" + url.QueryEscape(*next)
	}
	if pages != 3 || len(all) != 7 {
		t.Fatalf("got %d items over %d pages, want 7 over 3", len(all), pages)
	}
	for i, sb := range all {
		if !ids[sb.ID] {
			t.Fatalf("unexpected or repeated item %s", sb.ID)
		}
		delete(ids, sb.ID)
		if i > 0 && !sb.CreatedAt.Before(all[i-1].CreatedAt) {
			t.Fatalf("not newest first at %d", i)
		}
		if sb.Env != nil {
			t.Fatal("list item carries env")
		}
	}

	// A box deleted between pages does not break the cursor.
	first, next := page("limit=2&order=asc")
	h.s.Update(first[1].ID, func(sb *Sandbox) { sb.State = StateDestroying })
	h.s.Clock().Advance(time.Second)
	rest, _ := page("limit=100&order=asc&cursor=" + url.QueryEscape(*next))
	if len(rest) != 6 || !rest[0].CreatedAt.After(first[1].CreatedAt) {
		t.Fatalf("after deletion: %d items", len(rest))
	}

	if items, _ := page(`labels=` + url.QueryEscape(`{"n":"1"}`)); len(items) != 3 {
		t.Fatalf("label filter: %d items, want 3", len(items))
	}
	if items, _ := page("states[]=stopped"); len(items) != 1 {
		t.Fatalf("states[] filter: %d", len(items))
	}
	if items, _ := page("states=stopped,started"); len(items) != 7 {
		t.Fatalf("comma states: %d", len(items))
	}
	h.wantError(h.call("GET", "/api/sandbox?limit=201", ""), 400, "greater than 200")
	h.wantError(h.call("GET", "/api/sandbox?cursor=garbage", ""), 400, "cursor")
	h.wantError(h.call("GET", "/api/sandbox?states=sleeping", ""), 400, "sleeping")
	h.wantError(h.call("GET", "/api/sandbox?labels=notjson", ""), 400, "labels")
	h.wantError(h.call("GET", "/api/sandbox?limit=2&cursor="+url.QueryEscape(*next), ""), 400, "sort order")
}

func TestAuth(t *testing.T) {
	h := newHarness(t, Options{Tokens: []string{"second-key"}})
	h.wantError(h.call("GET", "/api/sandbox", "", "Authorization", ""), 401, "Unauthorized")
	h.wantError(h.call("GET", "/api/sandbox", "", "Authorization", "Bearer nope"), 401, "Invalid API key")
	h.wantError(h.call("GET", "/api/sandbox", "", "Authorization", "", "X-API-Key", token), 401, "Unauthorized")
	h.wantError(h.call("GET", "/api/sandbox", "", "Authorization", "Basic "+token), 401, "Invalid API key")
	if r := h.call("GET", "/api/sandbox", "", "Authorization", "Bearer second-key"); r.Status != 200 {
		t.Fatalf("second token: %d", r.Status)
	}
	reqs := h.s.Requests().All()
	if len(reqs) != 5 || reqs[2].Auth[0] != "X-API-Key" || reqs[4].Result != emulator.AuthOK {
		t.Fatalf("log: %+v", reqs)
	}
	raw, _ := json.Marshal(reqs)
	if strings.Contains(string(raw), token) || strings.Contains(string(raw), "second-key") {
		t.Fatal("request log holds a token value")
	}
}

func TestAutoStopArchiveDelete(t *testing.T) {
	h := newHarness(t, Options{Delays: &Delays{}}) // instant transitions
	clock := h.s.Clock()
	sb := h.sandbox("POST", "/api/sandbox", `{"autoArchiveInterval":60,"autoDeleteInterval":-1}`, 200)
	if sb.State != StateStarted {
		t.Fatalf("instant create: %s", sb.State)
	}

	clock.Advance(14 * time.Minute)
	if r := h.call("POST", "/api/sandbox/"+sb.ID+"/last-activity", ""); r.Status != 201 {
		t.Fatalf("last-activity: %d", r.Status)
	}
	clock.Advance(14 * time.Minute)
	got := h.sandbox("GET", "/api/sandbox/"+sb.ID, "", 200)
	if got.State != StateStarted || !got.LastActivityAt.Equal(t0.Add(14*time.Minute)) {
		t.Fatalf("keep-alive ignored: %s, lastActivityAt %v", got.State, got.LastActivityAt)
	}
	clock.Advance(2 * time.Minute) // 16 min after the keep-alive
	got = h.sandbox("GET", "/api/sandbox/"+sb.ID, "", 200)
	stoppedAt := t0.Add(29 * time.Minute)
	if got.State != StateStopped || !got.LastActivityAt.Equal(stoppedAt) {
		t.Fatalf("auto-stop: %s at %v, want stopped at %v", got.State, got.LastActivityAt, stoppedAt)
	}
	clock.Advance(58 * time.Minute) // archive is due 60 min after the stop, at 89 min
	if s := h.state(sb.ID); s != StateStopped {
		t.Fatalf("archived early: %s", s)
	}
	clock.Advance(time.Minute)
	if s := h.state(sb.ID); s != StateArchived {
		t.Fatalf("auto-archive: %s", s)
	}
	clock.Advance(365 * 24 * time.Hour)
	if s := h.state(sb.ID); s != StateArchived {
		t.Fatalf("archived box changed: %s", s)
	}

	// Auto-delete of a stopped box, earlier than its auto-archive.
	del := h.sandbox("POST", "/api/sandbox", `{"autoStopInterval":5,"autoDeleteInterval":30}`, 200)
	clock.Advance(5*time.Minute + 29*time.Minute)
	if s := h.state(del.ID); s != StateStopped {
		t.Fatalf("before auto-delete: %s", s)
	}
	clock.Advance(time.Minute)
	h.wantError(h.call("GET", "/api/sandbox/"+del.ID, ""), 404, del.ID)

	// Ephemeral (autoDeleteInterval 0): stop is a delete.
	eph := h.sandbox("POST", "/api/sandbox", `{"autoDeleteInterval":0}`, 200)
	if r := h.call("POST", "/api/sandbox/"+eph.ID+"/stop", ""); r.Status != 200 {
		t.Fatalf("stop ephemeral: %d", r.Status)
	}
	if _, ok := h.s.Sandbox(eph.ID); ok {
		t.Fatal("ephemeral sandbox survived stop")
	}

	// autoStopInterval 0 disables auto-stop.
	never := h.sandbox("POST", "/api/sandbox", `{"autoStopInterval":0}`, 200)
	clock.Advance(30 * 24 * time.Hour)
	if s := h.state(never.ID); s != StateStarted {
		t.Fatalf("autoStop 0: %s", s)
	}
}

func TestClockJumpReplaysChain(t *testing.T) {
	h := newHarness(t, Options{})
	sb := h.sandbox("POST", "/api/sandbox", `{"autoArchiveInterval":60}`, 200)
	h.s.Clock().Advance(3 * time.Hour)
	got, _ := h.s.Sandbox(sb.ID)
	// created +2s, stop due 15m later, stopped +2s, archive due 60m later, archived +5s.
	want := t0.Add(2*time.Second + 15*time.Minute + 2*time.Second + 60*time.Minute + 5*time.Second)
	if got.State != StateArchived || !got.LastActivityAt.Equal(want) {
		t.Fatalf("after jump: %s at %v, want archived at %v", got.State, got.LastActivityAt, want)
	}
}

func TestIllegalTransitions(t *testing.T) {
	h := newHarness(t, Options{})
	sb := h.sandbox("POST", "/api/sandbox", `{}`, 200)
	base := "/api/sandbox/" + sb.ID

	e := h.wantError(h.call("POST", base+"/stop", ""), 409, "state change in progress")
	if e.Code != codeStateChange {
		t.Fatalf("code %q", e.Code)
	}
	h.wantError(h.call("POST", base+"/start", ""), 409, "in progress")
	h.wantError(h.call("DELETE", base, ""), 409, "in progress")
	h.s.Clock().Advance(2 * time.Second)

	h.wantError(h.call("POST", base+"/archive", ""), 400, "not stopped")
	h.wantError(h.call("POST", base+"/pause", ""), 422, "not supported")
	h.call("POST", base+"/stop", "")
	h.s.Clock().Advance(2 * time.Second)
	e = h.wantError(h.call("POST", base+"/stop", ""), 400, "not started")
	if e.Code != codeState {
		t.Fatalf("code %q", e.Code)
	}

	vm := h.s.Seed(SeedSandbox{SandboxClass: "linux-vm"})
	if r := h.call("POST", "/api/sandbox/"+vm.ID+"/pause", ""); r.Status != 200 {
		t.Fatalf("pause vm: %d %s", r.Status, r.Body)
	}
	h.s.Clock().Advance(time.Second)
	if s := h.state(vm.ID); s != StatePaused {
		t.Fatalf("paused: %s", s)
	}
	h.wantError(h.call("POST", "/api/sandbox/"+vm.ID+"/pause", ""), 400, "not started")
	if s := h.sandbox("POST", "/api/sandbox/"+vm.ID+"/start", "", 200).State; s != StateResuming {
		t.Fatalf("resume: %s", s)
	}

	h.wantError(h.call("POST", "/api/sandbox", `{"cpu":4}`), 400, "resources")
	h.wantError(h.call("POST", "/api/sandbox", `{"autoStopInterval":-1}`), 400, "autoStopInterval")
	h.wantError(h.call("POST", "/api/sandbox", `{not json`), 400, "Invalid request body")
	h.call("POST", "/api/sandbox", `{"name":"dup"}`)
	h.wantError(h.call("POST", "/api/sandbox", `{"name":"dup"}`), 409, "already exists")
}

func TestNotFound(t *testing.T) {
	h := newHarness(t, Options{})
	e := h.wantError(h.call("GET", "/api/sandbox/nope", ""), 404, "Sandbox with ID or name nope not found")
	if e.Path != "/api/sandbox/nope" {
		t.Fatalf("path %q", e.Path)
	}
	for _, p := range []string{"/start", "/stop", "/archive", "/last-activity"} {
		h.wantError(h.call("POST", "/api/sandbox/nope"+p, ""), 404, "nope")
	}
	h.wantError(h.call("DELETE", "/api/sandbox/nope", ""), 404, "nope")
	h.wantError(h.call("GET", "/api/nothing-here", ""), 404, "Cannot GET")
}

func TestRateLimitFault(t *testing.T) {
	h := newHarness(t, Options{})
	h.s.Faults().RateLimit(2, 30*time.Second)
	for range 2 {
		r := h.call("GET", "/api/sandbox", "")
		h.wantError(r, 429, "Rate limit exceeded")
		if r.Header.Get("Retry-After-authenticated") != "30" || r.Header.Get("X-RateLimit-Remaining-authenticated") != "0" {
			t.Fatalf("429 headers: %v", r.Header)
		}
	}
	r := h.call("GET", "/api/sandbox", "")
	if r.Status != 200 || r.Header.Get("X-RateLimit-Limit-authenticated") != "10000" ||
		r.Header.Get("X-RateLimit-Remaining-authenticated") != "9999" {
		t.Fatalf("after the faults: %d %v", r.Status, r.Header)
	}

	h.s.Faults().RateLimit(1, 5*time.Second)
	r = h.call("POST", "/api/sandbox", `{}`)
	if r.Status != 429 || r.Header.Get("Retry-After-sandbox-create") != "5" {
		t.Fatalf("create 429: %d %v", r.Status, r.Header)
	}
	h.s.Faults().Add(emulator.Fault{Kind: emulator.FaultRateLimit, Throttler: "failed-auth", RetryAfter: 9 * time.Second})
	r = h.call("GET", "/api/sandbox", "")
	if r.Status != 429 || r.Header.Get("Retry-After") != "9" {
		t.Fatalf("failed-auth 429: %d %v", r.Status, r.Header)
	}
}

func TestEnforcedRateLimit(t *testing.T) {
	h := newHarness(t, Options{EnforceRateLimits: true, RateLimits: map[string]int{"sandbox-create": 2}})
	for range 2 {
		if r := h.call("POST", "/api/sandbox", `{}`); r.Status != 200 {
			t.Fatalf("create: %d", r.Status)
		}
	}
	r := h.call("POST", "/api/sandbox", `{}`)
	h.wantError(r, 429, "Rate limit")
	if r.Header.Get("Retry-After-sandbox-create") != "60" {
		t.Fatalf("Retry-After-sandbox-create = %q", r.Header.Get("Retry-After-sandbox-create"))
	}
	if len(h.s.Sandboxes()) != 2 {
		t.Fatal("a throttled create made a sandbox")
	}
	h.s.Clock().Advance(time.Minute)
	if r := h.call("POST", "/api/sandbox", `{}`); r.Status != 200 {
		t.Fatalf("after the window: %d", r.Status)
	}
}

func TestServerErrorFault(t *testing.T) {
	h := newHarness(t, Options{})
	h.s.Faults().Fail(1, 503)
	h.s.Faults().Fail(1, 500)
	h.wantError(h.call("GET", "/api/sandbox", ""), 503, "Service Unavailable")
	h.wantError(h.call("GET", "/api/sandbox", ""), 500, "unexpected")
	if r := h.call("GET", "/api/sandbox", ""); r.Status != 200 {
		t.Fatalf("after faults: %d", r.Status)
	}
}

func TestAdminMounting(t *testing.T) {
	off := newHarness(t, Options{})
	if r := off.call("GET", "/_emulator/state", ""); r.Status != 404 {
		t.Fatalf("admin route reachable when not mounted: %d", r.Status)
	}
	on := newHarness(t, Options{Admin: true})
	r := on.call("POST", "/_emulator/seed", `{"name":"adopt-me","state":"stopped","labels":{"x":"y"}}`, "Authorization", "")
	if r.Status != 201 {
		t.Fatalf("seed: %d %s", r.Status, r.Body)
	}
	on.call("POST", "/_emulator/clock", `{"advance":"1h"}`)
	if r := on.call("POST", "/_emulator/sandboxes/adopt-me/activity", ""); r.Status != 204 {
		t.Fatalf("activity: %d", r.Status)
	}
	var state []Sandbox
	on.call("GET", "/_emulator/state", "").Decode(t, &state)
	if len(state) != 1 || state[0].Name != "adopt-me" || !state[0].LastActivityAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("state: %+v", state)
	}
	if r := on.call("POST", "/_emulator/seed", `{"name":"adopt-me"}`); r.Status != 400 {
		t.Fatalf("duplicate seed: %d", r.Status)
	}
	if n := len(on.s.Requests().All()); n != 0 {
		t.Fatalf("admin calls were logged as API requests: %d", n)
	}
}

func TestSeededBoxFollowsNativeLifecycle(t *testing.T) {
	h := newHarness(t, Options{})
	// A box someone else created, idle for an hour: Daytona would have
	// stopped it 15 minutes after its last activity.
	old := h.s.Seed(SeedSandbox{Name: "not-ours", CreatedAt: t0.Add(-2 * time.Hour), LastActivityAt: t0.Add(-time.Hour)})
	got, ok := h.s.Sandbox("not-ours")
	want := t0.Add(-time.Hour + 15*time.Minute + 2*time.Second)
	if !ok || got.State != StateStopped || !got.LastActivityAt.Equal(want) {
		t.Fatalf("seeded idle box: %s at %v, want stopped at %v", got.State, got.LastActivityAt, want)
	}
	if !h.s.Update(old.ID, func(sb *Sandbox) { sb.Labels["adopted"] = "yes" }) {
		t.Fatal("Update: not found")
	}
	var list struct{ Items []Sandbox }
	h.call("GET", "/api/sandbox?labels="+url.QueryEscape(`{"adopted":"yes"}`), "").Decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != old.ID {
		t.Fatalf("adopted box not listed by label: %+v", list.Items)
	}
	if n := len(h.s.Requests().Matching("", old.ID)); n != 0 {
		t.Fatalf("%d requests named the box", n)
	}
}
