package e2b

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/e2e/emulators/emulator/emutest"
)

const key = "e2b_test_key_abcdef"

var t0 = time.Date(2026, 8, 1, 9, 0, 0, 0, time.UTC)

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
		o.Token = key
	}
	if o.Clock == nil {
		o.Clock = emulator.NewFakeClock(t0)
	}
	s := New(o)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Close(); srv.Close() })
	c := &emutest.Client{T: t, URL: srv.URL, Header: "X-API-Key", Value: key, JSON: false}
	return &harness{t: t, s: s, srv: srv, c: c}
}

func (h *harness) wantError(r response, status int, msgPart string) {
	h.t.Helper()
	h.want(r, status)
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	r.Decode(h.t, &e)
	if e.Code != status || !strings.Contains(e.Message, msgPart) {
		h.t.Fatalf("error body %s: want code %d and message containing %q", r.Body, status, msgPart)
	}
}

func (h *harness) create(body string) Created {
	h.t.Helper()
	var c Created
	h.want(h.call("POST", "/sandboxes", body), 201).Decode(h.t, &c)
	return c
}

func (h *harness) detail(id string) Detail {
	h.t.Helper()
	var d Detail
	h.want(h.call("GET", "/sandboxes/"+id, ""), 200).Decode(h.t, &d)
	return d
}

func TestLifecycle(t *testing.T) {
	h := newHarness(t, Options{})
	clock := h.s.Clock()
	c := h.create(`{"templateID":"base","timeout":300,"metadata":{"companion.workspace":"w1"}}`)
	if c.SandboxID == "" || c.TemplateID != "base" || c.ClientID == "" {
		t.Fatalf("created: %+v", c)
	}
	d := h.detail(c.SandboxID)
	if d.State != StateRunning || !d.StartedAt.Equal(t0) || !d.EndAt.Equal(t0.Add(300*time.Second)) ||
		d.Metadata["companion.workspace"] != "w1" || d.Lifecycle.OnTimeout != "kill" {
		t.Fatalf("detail: %+v", d)
	}

	clock.Advance(time.Minute)
	h.want(h.call("POST", "/sandboxes/"+c.SandboxID+"/pause", ""), 204)
	d = h.detail(c.SandboxID)
	if d.State != StatePaused || !d.EndAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("paused: %s endAt %v", d.State, d.EndAt)
	}
	// A paused box has no TTL: a year later it is still there.
	clock.Advance(365 * 24 * time.Hour)
	if d = h.detail(c.SandboxID); d.State != StatePaused {
		t.Fatalf("paused box changed: %s", d.State)
	}

	h.want(h.call("POST", "/sandboxes/"+c.SandboxID+"/connect", `{"timeout":600}`), 201)
	now := clock.Now()
	d = h.detail(c.SandboxID)
	if d.State != StateRunning || !d.StartedAt.Equal(now) || !d.EndAt.Equal(now.Add(600*time.Second)) {
		t.Fatalf("resumed: %+v", d)
	}
	// Connecting to a running box only ever extends the TTL.
	h.want(h.call("POST", "/sandboxes/"+c.SandboxID+"/connect", `{"timeout":60}`), 200)
	if d = h.detail(c.SandboxID); !d.EndAt.Equal(now.Add(600 * time.Second)) {
		t.Fatalf("connect shortened the TTL: %v", d.EndAt)
	}
	h.want(h.call("POST", "/sandboxes/"+c.SandboxID+"/connect", `{"timeout":3600}`), 200)
	if d = h.detail(c.SandboxID); !d.EndAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("connect did not extend: %v", d.EndAt)
	}
	// timeout overwrites, shorter included.
	h.want(h.call("POST", "/sandboxes/"+c.SandboxID+"/timeout", `{"timeout":30}`), 204)
	if d = h.detail(c.SandboxID); !d.EndAt.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("timeout: %v", d.EndAt)
	}

	h.want(h.call("DELETE", "/sandboxes/"+c.SandboxID, ""), 204)
	h.wantError(h.call("GET", "/sandboxes/"+c.SandboxID, ""), 404, "doesn't exist")
	h.wantError(h.call("DELETE", "/sandboxes/"+c.SandboxID, ""), 404, c.SandboxID)
}

func TestTimeoutKillsOrPauses(t *testing.T) {
	h := newHarness(t, Options{})
	clock := h.s.Clock()
	kill := h.create(`{"templateID":"base"}`) // API default timeout: 15 s
	keep := h.create(`{"templateID":"base","timeout":60,"autoPause":true}`)
	if d := h.detail(keep.SandboxID); d.Lifecycle.OnTimeout != "pause" {
		t.Fatalf("onTimeout: %q", d.Lifecycle.OnTimeout)
	}
	clock.Advance(14 * time.Second)
	h.want(h.call("GET", "/sandboxes/"+kill.SandboxID, ""), 200)
	clock.Advance(time.Second)
	h.wantError(h.call("GET", "/sandboxes/"+kill.SandboxID, ""), 404, kill.SandboxID)

	clock.Advance(10 * time.Minute)
	d := h.detail(keep.SandboxID)
	if d.State != StatePaused || !d.EndAt.Equal(t0.Add(60*time.Second)) {
		t.Fatalf("auto-paused: %s, endAt %v (want the moment it paused)", d.State, d.EndAt)
	}
	// A paused sandbox is not in the orchestrator: timeout is 404.
	h.wantError(h.call("POST", "/sandboxes/"+keep.SandboxID+"/timeout", `{"timeout":30}`), 404, keep.SandboxID)

	// refreshes extends, never shortens.
	r := h.create(`{"templateID":"base","timeout":100}`)
	h.want(h.call("POST", "/sandboxes/"+r.SandboxID+"/refreshes", `{"duration":10}`), 204)
	if d := h.detail(r.SandboxID); !d.EndAt.Equal(clock.Now().Add(100 * time.Second)) {
		t.Fatalf("refresh shortened: %v", d.EndAt)
	}
	h.wantError(h.call("POST", "/sandboxes/"+r.SandboxID+"/refreshes", `{"duration":3601}`), 400, "duration")
}

func TestPagination(t *testing.T) {
	h := newHarness(t, Options{})
	want := map[string]bool{}
	for i := range 7 {
		st := StateRunning
		if i%3 == 0 {
			st = StatePaused
		}
		sb := h.s.Seed(Sandbox{State: st, StartedAt: t0.Add(-time.Duration(i) * time.Minute),
			Metadata: map[string]string{"owner": fmt.Sprint(i % 2)}})
		want[sb.SandboxID] = true
	}
	// Two sandboxes with the same start time are ordered by id.
	same1 := h.s.Seed(Sandbox{SandboxID: "zzzz", StartedAt: t0.Add(-time.Hour)})
	same2 := h.s.Seed(Sandbox{SandboxID: "aaaa", StartedAt: t0.Add(-time.Hour)})
	want[same1.SandboxID], want[same2.SandboxID] = true, true

	var all []Sandbox
	q := "limit=4"
	pages := 0
	for {
		r := h.want(h.call("GET", "/v2/sandboxes?"+q, ""), 200)
		var items []Sandbox
		r.Decode(t, &items)
		pages++
		all = append(all, items...)
		if r.Header.Get("X-Total-Running") != "6" {
			t.Fatalf("X-Total-Running = %q", r.Header.Get("X-Total-Running"))
		}
		next := r.Header.Get("X-Next-Token")
		if next == "" {
			break
		}
		q = "limit=4&nextToken=" + url.QueryEscape(next)
	}
	if pages != 3 || len(all) != 9 {
		t.Fatalf("%d items over %d pages, want 9 over 3", len(all), pages)
	}
	for i, sb := range all {
		if !want[sb.SandboxID] {
			t.Fatalf("repeated or unknown item %s", sb.SandboxID)
		}
		delete(want, sb.SandboxID)
		if i > 0 && newestFirst(all[i-1], sb) >= 0 {
			t.Fatalf("order broken at %d", i)
		}
	}
	if all[7].SandboxID != "zzzz" || all[8].SandboxID != "aaaa" {
		t.Fatalf("tie order: %s %s", all[7].SandboxID, all[8].SandboxID)
	}

	count := func(q string) int {
		var items []Sandbox
		h.want(h.call("GET", "/v2/sandboxes?"+q, ""), 200).Decode(t, &items)
		return len(items)
	}
	if n := count("state=paused"); n != 3 {
		t.Fatalf("paused: %d", n)
	}
	if n := count("state=running,paused"); n != 9 {
		t.Fatalf("running,paused: %d", n)
	}
	if n := count("metadata=" + url.QueryEscape("owner=1")); n != 3 {
		t.Fatalf("metadata owner=1: %d", n)
	}
	if n := count("state=running&metadata=" + url.QueryEscape("owner=0")); n != 2 {
		t.Fatalf("running owner=0: %d", n)
	}
	r := h.want(h.call("GET", "/v2/sandboxes?state=paused", ""), 200)
	if r.Header.Get("X-Total-Running") != "" {
		t.Fatal("X-Total-Running sent when running sandboxes were not asked for")
	}
	var legacy []Sandbox
	h.want(h.call("GET", "/sandboxes", ""), 200).Decode(t, &legacy)
	if len(legacy) != 6 {
		t.Fatalf("v1 list: %d running", len(legacy))
	}
	h.wantError(h.call("GET", "/v2/sandboxes?limit=101", ""), 400, "limit")
	h.wantError(h.call("GET", "/v2/sandboxes?state=stopped", ""), 400, "state")
	h.wantError(h.call("GET", "/v2/sandboxes?nextToken=%25%25", ""), 400, "Invalid next token")
	h.wantError(h.call("GET", "/v2/sandboxes?metadata=novalue", ""), 400, "metadata")
}

func TestAuth(t *testing.T) {
	h := newHarness(t, Options{})
	h.wantError(h.call("GET", "/v2/sandboxes", "", "X-API-Key", ""), 401, "missing")
	h.wantError(h.call("GET", "/v2/sandboxes", "", "X-API-Key", "bad"), 401, "Invalid API key")
	h.wantError(h.call("GET", "/v2/sandboxes", "", "X-API-Key", "", "Authorization", "Bearer "+key), 401, "")
	reqs := h.s.Requests().All()
	if got := reqs[2].Auth; len(got) != 1 || got[0] != "Authorization: Bearer" {
		t.Fatalf("presented: %v", got)
	}
	raw, _ := json.Marshal(reqs)
	if strings.Contains(string(raw), key) {
		t.Fatal("request log holds the key")
	}
}

func TestConflictsAndValidation(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrent: 2, MaxTimeout: time.Hour})
	a := h.create(`{"templateID":"base","timeout":600}`)
	h.want(h.call("POST", "/sandboxes/"+a.SandboxID+"/pause", `{"memory":true}`), 204)
	h.wantError(h.call("POST", "/sandboxes/"+a.SandboxID+"/pause", ""), 409, "is already paused")
	h.wantError(h.call("POST", "/sandboxes/nope/pause", ""), 404, `"nope"`)
	h.wantError(h.call("POST", "/sandboxes/nope/connect", `{"timeout":10}`), 404, "nope")
	h.wantError(h.call("POST", "/sandboxes/"+a.SandboxID+"/connect", `{}`), 400, "timeout")
	h.wantError(h.call("POST", "/sandboxes", `{"timeout":10}`), 400, "templateID")
	h.wantError(h.call("POST", "/sandboxes", `{"templateID":"base","timeout":7200}`), 400, "cannot be greater than 1 hours")
	h.wantError(h.call("POST", "/sandboxes", `{"templateID":`), 400, "validation error")

	h.create(`{"templateID":"base","timeout":600}`)
	h.create(`{"templateID":"base","timeout":600}`)
	h.wantError(h.call("POST", "/sandboxes", `{"templateID":"base"}`), 429, "maximum number of concurrent")
	h.wantError(h.call("POST", "/sandboxes/"+a.SandboxID+"/connect", `{"timeout":60}`), 429, "concurrent")
	if d := h.detail(a.SandboxID); d.State != StatePaused {
		t.Fatalf("refused resume changed state: %s", d.State)
	}
	h.wantError(h.call("POST", "/sandboxes/"+a.SandboxID+"/resume", `{}`), 429, "concurrent")
}

func TestFaults(t *testing.T) {
	h := newHarness(t, Options{})
	h.s.Faults().RateLimit(1, 12*time.Second)
	r := h.call("GET", "/v2/sandboxes", "")
	h.wantError(r, 429, "Rate limit exceeded")
	if r.Header.Get("Retry-After") != "12" || r.Header.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("429 headers: %v", r.Header)
	}
	h.s.Faults().Fail(2, 503)
	h.wantError(h.call("POST", "/sandboxes", `{"templateID":"base"}`), 503, "")
	h.wantError(h.call("GET", "/v2/sandboxes", ""), 503, "")
	if len(h.s.Sandboxes()) != 0 {
		t.Fatal("a faulted create made a sandbox")
	}
	h.want(h.call("GET", "/v2/sandboxes", ""), 200)
}

func TestAdmin(t *testing.T) {
	h := newHarness(t, Options{Admin: true})
	r := h.want(h.call("POST", "/_emulator/seed", `{"sandboxID":"adopt1","state":"running","autoPause":true,"metadata":{"k":"v"}}`, "X-API-Key", ""), 201)
	var d Detail
	r.Decode(t, &d)
	if d.SandboxID != "adopt1" || d.Lifecycle.OnTimeout != "pause" || !d.EndAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("seeded: %+v", d)
	}
	h.want(h.call("POST", "/_emulator/clock", `{"advance":"2h"}`), 200)
	var state []Detail
	h.want(h.call("GET", "/_emulator/state", ""), 200).Decode(t, &state)
	if len(state) != 1 || state[0].State != StatePaused {
		t.Fatalf("state after clock jump: %+v", state)
	}
	// Nobody polled it: the API log is empty.
	if got := h.s.Requests().Matching("", "adopt1"); len(got) != 0 {
		t.Fatalf("requests touching the box: %+v", got)
	}
}
