package runtimeapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

const token = "rtapi_test_key"

type fixture struct {
	t     *testing.T
	s     *Server
	srv   *httptest.Server
	clock *emulator.Clock
}

func newFixture(t *testing.T, o Options) *fixture {
	clock := emulator.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	o.Token, o.Clock = token, clock
	s := New(o)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(s.Close)
	s.SetBaseURL(srv.URL)
	return &fixture{t: t, s: s, srv: srv, clock: clock}
}

// call sends one request with the API key (or key header/value given in
// hdr) and decodes a JSON answer into a map.
func (f *fixture) call(method, path string, body any, hdr map[string]string) (int, map[string]any) {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, f.srv.URL+path, rd)
	if hdr == nil {
		req.Header.Set("X-API-Key", token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (f *fixture) agent(url, key, path string) int {
	f.t.Helper()
	req, _ := http.NewRequest("GET", url+path, nil)
	if key != "" {
		req.Header.Set("X-Session-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestLifecycleAndKeyRotation(t *testing.T) {
	f := newFixture(t, Options{})
	st, rt := f.call("POST", "/start", map[string]any{"image": "img", "command": "serve", "working_dir": "/workspace",
		"environment": map[string]string{"A": "1"}, "session_id": "s1"}, nil)
	if st != 201 || rt["status"] != "running" || rt["runtime_id"] == "" || rt["session_api_key"] == "" {
		t.Fatalf("start: %d %v", st, rt)
	}
	rid, key, url := rt["runtime_id"].(string), rt["session_api_key"].(string), rt["url"].(string)
	if got := f.agent(url, key, "/api/conversations"); got != 200 {
		t.Fatalf("agent with its key: %d", got)
	}
	if got := f.agent(url, "wrong", "/api/conversations"); got != 401 {
		t.Fatalf("agent with a wrong key: %d", got)
	}
	if got := f.agent(url, "", "/ready"); got != 200 {
		t.Fatalf("the agent-server's /ready without a key: %d, want 200 (it needs none)", got)
	}
	st, sess := f.call("GET", "/sessions/s1", nil, nil)
	if st != 200 || sess["pod_status"] != "ready" || sess["runtime_id"] != rid {
		t.Fatalf("sessions: %d %v", st, sess)
	}
	if st, _ := f.call("POST", "/pause", map[string]string{"runtime_id": rid}, nil); st != 200 {
		t.Fatalf("pause: %d", st)
	}
	if got := f.agent(url, key, "/api/conversations"); got != 503 {
		t.Fatalf("agent while paused: %d, want 503", got)
	}
	if got := f.agent(url, "", "/health"); got != 503 {
		t.Fatalf("health while paused: %d, want 503", got)
	}
	st, res := f.call("POST", "/resume", map[string]string{"runtime_id": rid}, nil)
	newKey, _ := res["session_api_key"].(string)
	if st != 200 || newKey == "" || newKey == key || res["status"] != "running" {
		t.Fatalf("resume: %d %v (old key %s)", st, res, key)
	}
	if got := f.agent(url, key, "/api/conversations"); got != 401 {
		t.Fatalf("old key after resume: %d, want 401", got)
	}
	if got := f.agent(url, newKey, "/api/conversations"); got != 200 {
		t.Fatalf("new key after resume: %d", got)
	}
	if st, _ := f.call("POST", "/stop", map[string]string{"runtime_id": rid}, nil); st != 200 {
		t.Fatalf("stop: %d", st)
	}
	if st, _ := f.call("POST", "/stop", map[string]string{"runtime_id": rid}, nil); st != 404 {
		t.Fatalf("second stop: %d, want 404", st)
	}
	if got := f.agent(url, newKey, "/health"); got != 404 {
		t.Fatalf("url of a stopped runtime: %d, want 404", got)
	}
	if st, l := f.call("GET", "/list", nil, nil); st != 200 || l["total"] != 0.0 {
		t.Fatalf("list after stop: %d %v", st, l)
	}
}

func TestListSpansUsersAndAuth(t *testing.T) {
	f := newFixture(t, Options{})
	f.s.Seed(Runtime{SessionID: "someone-elses", User: "other"})
	f.call("POST", "/start", map[string]any{"image": "img", "session_id": "mine"}, nil)
	st, l := f.call("GET", "/list", nil, nil)
	if st != 200 || l["total"] != 2.0 {
		t.Fatalf("list: %d %v", st, l)
	}
	if st, _ := f.call("GET", "/list", nil, map[string]string{"X-API-Key": "nope"}); st != 401 {
		t.Fatalf("wrong key: %d", st)
	}
	if st, _ := f.call("GET", "/list", nil, map[string]string{}); st != 401 {
		t.Fatalf("no key: %d", st)
	}
	if st, _ := f.call("POST", "/start", map[string]any{"session_id": "x"}, nil); st != 422 {
		t.Fatalf("start without image: %d", st)
	}
	if st, _ := f.call("GET", "/sessions/never", nil, nil); st != 404 {
		t.Fatalf("unknown session: %d", st)
	}
}

func TestIdleReaperPausesAndPausedReaper(t *testing.T) {
	f := newFixture(t, Options{IdleAfter: 10 * time.Minute, PausedReapAfter: 24 * time.Hour})
	_, rt := f.call("POST", "/start", map[string]any{"image": "img", "session_id": "s"}, nil)
	url, key := rt["url"].(string), rt["session_api_key"].(string)
	f.clock.Advance(9 * time.Minute)
	f.agent(url, key, "/api/bash") // activity resets the idle time
	f.clock.Advance(9 * time.Minute)
	if r, _ := f.s.Session("s"); r.Status != StatusRunning {
		t.Fatalf("paused although active 9 min ago: %s", r.Status)
	}
	f.agent(url, "", "/server_info") // no auth, no activity
	f.agent(url, "", "/ready")
	f.clock.Advance(time.Minute + time.Second)
	r, _ := f.s.Session("s")
	if r.Status != StatusPaused || !r.PausedAt.Equal(r.LastActivity.Add(10*time.Minute)) {
		t.Fatalf("after 10 idle minutes: %+v", r)
	}
	f.clock.Advance(24 * time.Hour)
	if r, _ := f.s.Session("s"); r.Status != StatusStopped {
		t.Fatalf("after a paused day: %s, want stopped", r.Status)
	}
}

func TestRateLimitFault(t *testing.T) {
	f := newFixture(t, Options{})
	f.s.Faults().RateLimit(1, 7*time.Second)
	req, _ := http.NewRequest("GET", f.srv.URL+"/list", nil)
	req.Header.Set("X-API-Key", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("%d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
