package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable time source for the idle and uptime clocks.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const testKey = "k-0123456789"

type env struct {
	t     *testing.T
	s     *Server
	srv   *httptest.Server
	clock *clock
	dir   string
	key   string
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	if cfg.ConversationsPath == "" {
		cfg.ConversationsPath = filepath.Join(t.TempDir(), "conversations")
	}
	clk := &clock{t: time.Date(2026, 8, 22, 10, 0, 0, 123456789, time.UTC)}
	if cfg.Now == nil {
		cfg.Now = clk.Now
	}
	s, err := NewServer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	e := &env{t: t, s: s, srv: ts, clock: clk, dir: cfg.ConversationsPath}
	if len(cfg.Keys) > 0 {
		e.key = cfg.Keys[0]
	}
	return e
}

// do sends a request with the env's key and decodes a JSON answer into out
// (when out is non-nil). It returns the status and the raw body.
func (e *env) do(method, path string, body any, out any) (int, []byte) {
	e.t.Helper()
	return e.doKey(e.key, method, path, body, out)
}

func (e *env) doKey(key, method, path string, body any, out any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Session-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

func (e *env) idle() float64 {
	e.t.Helper()
	var info struct {
		IdleTime float64 `json:"idle_time"`
	}
	if code, raw := e.doKey("", "GET", "/server_info", nil, &info); code != 200 {
		e.t.Fatalf("server_info: %d %s", code, raw)
	}
	return info.IdleTime
}

func (e *env) create(body map[string]any) convInfo {
	e.t.Helper()
	var c convInfo
	if code, raw := e.do("POST", "/api/conversations", body, &c); code != http.StatusCreated {
		e.t.Fatalf("create: %d %s", code, raw)
	}
	return c
}

type convInfo struct {
	ID              string            `json:"id"`
	Title           *string           `json:"title"`
	Tags            map[string]string `json:"tags"`
	CreatedAt       string            `json:"created_at"`
	UpdatedAt       string            `json:"updated_at"`
	ExecutionStatus string            `json:"execution_status"`
	Agent           json.RawMessage   `json:"agent"`
}

type page struct {
	Items      []convInfo `json:"items"`
	NextPageID *string    `json:"next_page_id"`
}

func TestServerInfo(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}})
	e.clock.Advance(7*time.Second + 600*time.Millisecond)
	// Probes need no key even when keys are configured.
	code, raw := e.doKey("", "GET", "/server_info", nil, nil)
	if code != 200 {
		t.Fatalf("server_info: %d %s", code, raw)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	// Whole seconds, serialized with a ".0" as Python does.
	for _, f := range []string{`"uptime":7.0`, `"idle_time":7.0`, `"runtime_idle_timeout_seconds":null`} {
		if !bytes.Contains(raw, []byte(f)) {
			t.Errorf("server_info lacks %s: %s", f, raw)
		}
	}
	if m["title"] != "OpenHands Agent Server" || m["docs"] != "/docs" || m["redoc"] != "/redoc" || m["build_git_sha"] != "unknown" {
		t.Errorf("server_info fields: %v", m)
	}
	for _, f := range []string{"version", "sdk_version", "tools_version", "workspace_version", "python_version", "usable_tools", "capabilities"} {
		if _, ok := m[f]; !ok {
			t.Errorf("server_info lacks %s", f)
		}
	}
	// GET / is an alias.
	if code, raw2 := e.doKey("", "GET", "/", nil, nil); code != 200 || !bytes.Equal(raw, raw2) {
		t.Errorf("GET /: %d %s, want %s", code, raw2, raw)
	}
	for _, p := range []string{"/alive", "/health"} {
		if code, raw := e.doKey("", "GET", p, nil, nil); code != 200 || string(raw) != `{"status":"ok"}` {
			t.Errorf("%s: %d %s", p, code, raw)
		}
	}
	if code, raw := e.doKey("", "GET", "/ready", nil, nil); code != 200 || string(raw) != `{"status":"ready"}` {
		t.Errorf("/ready: %d %s", code, raw)
	}
	// Unrouted requests answer like FastAPI, before the auth check.
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/nope", `{"detail":"Not Found"}`},
		{"GET", "/api/nope", `{"detail":"Not Found"}`},
		{"DELETE", "/api/conversations", `{"detail":"Method Not Allowed"}`},
		{"GET", "/api/bash/execute_bash_command", `{"detail":"Method Not Allowed"}`},
	} {
		code, raw := e.doKey("", tc.method, tc.path, nil, nil)
		want := 404
		if strings.Contains(tc.body, "Method") {
			want = 405
		}
		if code != want || string(raw) != tc.body {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, code, raw)
		}
	}
}

func TestServerInfoIdleTimeout(t *testing.T) {
	e := newEnv(t, Config{RuntimeIdleTimeout: 1200})
	_, raw := e.do("GET", "/server_info", nil, nil)
	for _, f := range []string{`"runtime_idle_timeout_seconds":1200.0`, `"max_foreground_terminal_timeout_seconds":1080.0`} {
		if !bytes.Contains(raw, []byte(f)) {
			t.Errorf("server_info lacks %s: %s", f, raw)
		}
	}
}

func TestReadyDelay(t *testing.T) {
	e := newEnv(t, Config{ReadyDelay: 3 * time.Second})
	code, raw := e.do("GET", "/ready", nil, nil)
	if code != 503 || !bytes.Contains(raw, []byte(`"status":"initializing"`)) {
		t.Fatalf("/ready during start: %d %s", code, raw)
	}
	e.clock.Advance(3 * time.Second)
	if code, raw := e.do("GET", "/ready", nil, nil); code != 200 {
		t.Fatalf("/ready after start: %d %s", code, raw)
	}
}

func TestIdleClock(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}})
	e.clock.Advance(10 * time.Second)
	if got := e.idle(); got != 10 {
		t.Fatalf("idle after 10s = %v", got)
	}
	c := e.create(map[string]any{"agent": map[string]any{"llm": map[string]any{"model": "m"}}})
	if got := e.idle(); got != 0 {
		t.Fatalf("starting a conversation publishes events, idle = %v", got)
	}
	e.clock.Advance(5 * time.Second)
	// Reads are not activity.
	e.do("GET", "/api/conversations/search", nil, nil)
	e.do("GET", "/api/conversations/count", nil, nil)
	e.do("GET", "/api/conversations/"+c.ID, nil, nil)
	e.do("GET", "/api/conversations?ids="+c.ID, nil, nil)
	e.do("GET", "/api/file/download-trajectory/"+c.ID, nil, nil)
	e.do("PATCH", "/api/conversations/"+c.ID, map[string]any{"title": "t"}, nil)
	e.do("GET", "/health", nil, nil)
	if got := e.idle(); got != 5 {
		t.Fatalf("reads moved the idle clock: idle = %v, want 5", got)
	}
	var out map[string]any
	if code, raw := e.do("POST", "/api/bash/execute_bash_command", map[string]any{"command": "echo hi"}, &out); code != 200 {
		t.Fatalf("execute_bash_command: %d %s", code, raw)
	}
	if out["stdout"] != "hi\n" || out["exit_code"] != 0.0 || out["kind"] != "BashOutput" {
		t.Errorf("execute_bash_command answer: %v", out)
	}
	if got := e.idle(); got != 0 {
		t.Fatalf("bash command is activity, idle = %v", got)
	}
	e.clock.Advance(3 * time.Second)
	if code, raw := e.do("POST", "/api/conversations/"+c.ID+"/events", map[string]any{
		"role": "user", "content": []any{map[string]any{"type": "text", "text": "hello"}},
	}, nil); code != 200 {
		t.Fatalf("send message: %d %s", code, raw)
	}
	if got := e.idle(); got != 0 {
		t.Fatalf("message event is activity, idle = %v", got)
	}
	var after convInfo
	e.do("GET", "/api/conversations/"+c.ID, nil, &after)
	if after.UpdatedAt == c.UpdatedAt {
		t.Errorf("a message must move updated_at: %s", after.UpdatedAt)
	}
	if code, _ := e.do("POST", "/api/bash/execute_bash_command", map[string]any{"cwd": "/"}, nil); code != 422 {
		t.Errorf("bash without command: %d, want 422", code)
	}
}

// A box can start out idle (EMULATOR_IDLE_AT_START_SECONDS), so tests of
// idle handling need not wait on a clock they do not own; activity still
// resets it.
func TestIdleAtStart(t *testing.T) {
	cfg, err := ConfigFromEnv(func(k string) string {
		return map[string]string{"EMULATOR_IDLE_AT_START_SECONDS": "3600", "OH_SESSION_API_KEYS_0": testKey}[k]
	})
	if err != nil || cfg.IdleAtStart != time.Hour {
		t.Fatalf("ConfigFromEnv: %+v %v", cfg, err)
	}
	if _, err := ConfigFromEnv(func(k string) string {
		return map[string]string{"EMULATOR_IDLE_AT_START_SECONDS": "-1"}[k]
	}); err == nil || !strings.Contains(err.Error(), "EMULATOR_IDLE_AT_START_SECONDS") {
		t.Fatalf("a negative idle at start: %v, want an error naming the variable", err)
	}
	cfg.ConversationsPath = "" // a temporary directory, not workspace/ here
	e := newEnv(t, cfg)
	if got := e.idle(); got != 3600 {
		t.Fatalf("idle at start = %v, want 3600", got)
	}
	e.do("GET", "/api/conversations/count", nil, nil)
	if got := e.idle(); got != 3600 {
		t.Fatalf("a read moved the idle clock: %v", got)
	}
	if code, raw := e.do("POST", "/api/bash/execute_bash_command", map[string]any{"command": "echo hi"}, nil); code != 200 {
		t.Fatalf("execute_bash_command: %d %s", code, raw)
	}
	if got := e.idle(); got != 0 {
		t.Fatalf("activity did not reset an idle-at-start clock: %v", got)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey, "second-key"}})
	cases := []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"missing", nil, 401},
		{"wrong", map[string]string{"X-Session-API-Key": "nope"}, 401},
		{"bearer", map[string]string{"Authorization": "Bearer " + testKey}, 401},
		{"right", map[string]string{"X-Session-API-Key": testKey}, 200},
		{"rotated", map[string]string{"X-Session-API-Key": "second-key"}, 200},
	}
	for _, tc := range cases {
		for _, path := range []string{"/api/conversations/search", "/api/conversations/count", "/api/file/download-trajectory/" + strings.Repeat("a", 32)} {
			req, _ := http.NewRequest("GET", e.srv.URL+path+"?session_api_key="+testKey, nil)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := tc.want
			if want == 200 && strings.Contains(path, "trajectory") {
				want = 404
			}
			if resp.StatusCode != want {
				t.Errorf("%s %s: %d %s, want %d", tc.name, path, resp.StatusCode, raw, want)
			}
			if want == 401 && string(raw) != `{"detail":"Unauthorized"}` {
				t.Errorf("%s: body %s", tc.name, raw)
			}
		}
	}
	// No keys: open.
	open := newEnv(t, Config{})
	if code, raw := open.doKey("", "GET", "/api/conversations/count", nil, nil); code != 200 || string(raw) != "0" {
		t.Errorf("open server: %d %s", code, raw)
	}
}

func TestConfigFromEnv(t *testing.T) {
	vars := map[string]string{
		"OH_SESSION_API_KEYS_0":           "a",
		"OH_SESSION_API_KEYS_1":           "b",
		"OH_SESSION_API_KEYS_3":           "not-read: _2 is missing",
		"OH_SESSION_API_KEYS":             `["c"]`,
		"SESSION_API_KEY":                 "d",
		"OH_CONVERSATIONS_PATH":           "/x/conv",
		"OH_RUNTIME_IDLE_TIMEOUT_SECONDS": "0",
	}
	cfg, err := ConfigFromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Keys, ","); got != "a,b,c,d" {
		t.Errorf("keys = %s", got)
	}
	if cfg.ConversationsPath != "/x/conv" || cfg.RuntimeIdleTimeout != 0 || cfg.BuildGitSHA != "unknown" {
		t.Errorf("cfg = %+v", cfg)
	}
	vars["OH_SESSION_API_KEYS"] = "c"
	if _, err := ConfigFromEnv(func(k string) string { return vars[k] }); err == nil {
		t.Error("a non-JSON OH_SESSION_API_KEYS must be refused")
	}
	def, err := ConfigFromEnv(func(string) string { return "" })
	if err != nil || def.ConversationsPath != "workspace/conversations" || len(def.Keys) != 0 {
		t.Errorf("defaults: %+v %v", def, err)
	}
}

func TestConversationCRUD(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}})
	id := "0f4c3e2a-9b1d-4e5f-8a7b-6c5d4e3f2a1b"
	body := map[string]any{"conversation_id": id, "tags": map[string]string{"k": "v"}, "title": "first"}
	var c convInfo
	if code, raw := e.do("POST", "/api/conversations", body, &c); code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	if c.ID != id || c.ExecutionStatus != "idle" || c.Tags["k"] != "v" || c.Title == nil || *c.Title != "first" {
		t.Errorf("created: %+v", c)
	}
	if _, err := time.Parse(time.RFC3339Nano, c.CreatedAt); err != nil || !strings.HasSuffix(c.CreatedAt, "Z") {
		t.Errorf("created_at %q: %v", c.CreatedAt, err)
	}
	// Same id again (hex form): 200 with the existing conversation.
	var again convInfo
	if code, raw := e.do("POST", "/api/conversations", map[string]any{"conversation_id": strings.ReplaceAll(id, "-", "")}, &again); code != 200 {
		t.Fatalf("create existing: %d %s", code, raw)
	}
	if again.ID != id || again.CreatedAt != c.CreatedAt {
		t.Errorf("existing: %+v", again)
	}
	for _, form := range []string{id, strings.ReplaceAll(id, "-", ""), strings.ToUpper(id)} {
		var got convInfo
		if code, raw := e.do("GET", "/api/conversations/"+form, nil, &got); code != 200 || got.ID != id {
			t.Errorf("get %s: %d %s", form, code, raw)
		}
	}
	if code, raw := e.do("GET", "/api/conversations/not-a-uuid", nil, nil); code != 422 || !bytes.Contains(raw, []byte("uuid_parsing")) {
		t.Errorf("malformed id: %d %s", code, raw)
	}
	unknown := "11111111-2222-4333-8444-555555555555"
	if code, raw := e.do("GET", "/api/conversations/"+unknown, nil, nil); code != 404 || string(raw) != `{"detail":"Not Found"}` {
		t.Errorf("unknown id: %d %s", code, raw)
	}
	var batch []*convInfo
	if code, raw := e.do("GET", "/api/conversations?ids="+id+"&ids="+unknown, nil, &batch); code != 200 || len(batch) != 2 || batch[0] == nil || batch[0].ID != id || batch[1] != nil {
		t.Errorf("batch: %d %s", code, raw)
	}
	if code, _ := e.do("GET", "/api/conversations?ids=bad", nil, nil); code != 422 {
		t.Errorf("batch with a bad id: %d", code)
	}
	if code, _ := e.do("GET", "/api/conversations", nil, nil); code != 422 {
		t.Errorf("batch without ids: %d", code)
	}
	if code, raw := e.do("POST", "/api/conversations", map[string]any{"conversation_id": "xyz"}, nil); code != 422 {
		t.Errorf("create with bad id: %d %s", code, raw)
	}
	if code, raw := e.do("POST", "/api/conversations", map[string]any{"tags": []string{"x"}}, nil); code != 422 {
		t.Errorf("create with bad tags: %d %s", code, raw)
	}
	req, _ := http.NewRequest("POST", e.srv.URL+"/api/conversations", strings.NewReader("{not json"))
	req.Header.Set("X-Session-API-Key", testKey)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 422 {
		t.Errorf("malformed JSON: %v %v", resp.StatusCode, err)
	}
	// Pause and delete.
	var ok map[string]bool
	if code, _ := e.do("POST", "/api/conversations/"+id+"/pause", nil, &ok); code != 200 || !ok["success"] {
		t.Errorf("pause: %d %v", code, ok)
	}
	var n int
	e.do("GET", "/api/conversations/count?status=paused", nil, &n)
	if n != 1 {
		t.Errorf("count paused = %d", n)
	}
	if code, _ := e.do("GET", "/api/conversations/count?status=bogus", nil, nil); code != 422 {
		t.Errorf("count with bad status: %d", code)
	}
	if code, _ := e.do("DELETE", "/api/conversations/"+id, nil, &ok); code != 200 || !ok["success"] {
		t.Errorf("delete: %d", code)
	}
	if _, err := os.Stat(filepath.Join(e.dir, strings.ReplaceAll(id, "-", ""))); !os.IsNotExist(err) {
		t.Errorf("conversation directory survived delete: %v", err)
	}
	if code, _ := e.do("GET", "/api/conversations/"+id, nil, nil); code != 404 {
		t.Errorf("get after delete: %d", code)
	}
	if code, _ := e.do("DELETE", "/api/conversations/"+id, nil, nil); code != 400 {
		t.Errorf("second delete: %d, want 400", code)
	}
}

func TestSearchPaging(t *testing.T) {
	e := newEnv(t, Config{})
	var ids []string
	for i := range 5 {
		c := e.create(map[string]any{"title": fmt.Sprint("c", i)})
		ids = append(ids, c.ID)
		e.clock.Advance(time.Second)
	}
	// Touch c1 so UPDATED_AT order differs from CREATED_AT order.
	e.do("POST", "/api/conversations/"+ids[1]+"/events", map[string]any{"content": []any{}}, nil)
	e.do("POST", "/api/conversations/"+ids[2]+"/pause", nil, nil)

	collect := func(query string) []string {
		var got []string
		pageID := ""
		for range 10 {
			q := query
			if pageID != "" {
				q += "&page_id=" + pageID
			}
			var p page
			if code, raw := e.do("GET", "/api/conversations/search?"+q, nil, &p); code != 200 {
				t.Fatalf("search %s: %d %s", q, code, raw)
			}
			// Each page starts at the id the previous one announced.
			if pageID != "" && (len(p.Items) == 0 || strings.ReplaceAll(p.Items[0].ID, "-", "") != pageID) {
				t.Fatalf("page for page_id %s starts elsewhere: %+v", pageID, p.Items)
			}
			for _, it := range p.Items {
				got = append(got, it.ID)
			}
			if p.NextPageID == nil {
				return got
			}
			if len(*p.NextPageID) != 32 || strings.Contains(*p.NextPageID, "-") {
				t.Fatalf("next_page_id %q is not 32-hex", *p.NextPageID)
			}
			pageID = *p.NextPageID
		}
		t.Fatal("paging did not end")
		return nil
	}
	want := func(order ...int) string {
		var s []string
		for _, i := range order {
			s = append(s, ids[i])
		}
		return strings.Join(s, ",")
	}
	if got := strings.Join(collect("limit=2"), ","); got != want(4, 3, 2, 1, 0) {
		t.Errorf("default order (CREATED_AT_DESC) = %s", got)
	}
	if got := strings.Join(collect("limit=2&sort_order=CREATED_AT"), ","); got != want(0, 1, 2, 3, 4) {
		t.Errorf("CREATED_AT = %s", got)
	}
	if got := strings.Join(collect("limit=3&sort_order=UPDATED_AT_DESC"), ","); got != want(1, 4, 3, 2, 0) {
		t.Errorf("UPDATED_AT_DESC = %s", got)
	}
	if got := strings.Join(collect("limit=1&sort_order=UPDATED_AT"), ","); got != want(0, 2, 3, 4, 1) {
		t.Errorf("UPDATED_AT = %s", got)
	}
	if got := strings.Join(collect("status=paused"), ","); got != want(2) {
		t.Errorf("status=paused = %s", got)
	}
	// A page starts AT page_id.
	var p page
	e.do("GET", "/api/conversations/search?sort_order=CREATED_AT&limit=2&page_id="+strings.ReplaceAll(ids[3], "-", ""), nil, &p)
	if len(p.Items) != 2 || p.Items[0].ID != ids[3] || p.Items[1].ID != ids[4] || p.NextPageID != nil {
		t.Errorf("page at ids[3]: %+v", p)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "sort_order=NAME", "status=nope"} {
		if code, raw := e.do("GET", "/api/conversations/search?"+q, nil, nil); code != 422 {
			t.Errorf("search %s: %d %s, want 422", q, code, raw)
		}
	}
	var n int
	e.do("GET", "/api/conversations/count", nil, &n)
	if n != 5 {
		t.Errorf("count = %d", n)
	}
}

func TestPersistence(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conv")
	e := newEnv(t, Config{ConversationsPath: dir})
	c := e.create(map[string]any{"title": "kept", "tags": map[string]string{"a": "b"}})
	e.do("POST", "/api/conversations/"+c.ID+"/pause", nil, nil)
	e.do("POST", "/api/conversations/"+c.ID+"/events", map[string]any{"content": []any{map[string]string{"type": "text", "text": "x"}}}, nil)
	var before convInfo
	e.do("GET", "/api/conversations/"+c.ID, nil, &before)
	hex := strings.ReplaceAll(c.ID, "-", "")
	for _, f := range []string{"meta.json", "base_state.json"} {
		if _, err := os.Stat(filepath.Join(dir, hex, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	events, _ := filepath.Glob(filepath.Join(dir, hex, "events", "event-*.json"))
	if len(events) != 2 || !strings.Contains(filepath.Base(events[0]), "event-00000-") || !strings.Contains(filepath.Base(events[1]), "event-00001-") {
		t.Errorf("events on disk: %v", events)
	}
	// A stray directory and a half-written conversation are skipped.
	os.MkdirAll(filepath.Join(dir, "not-a-conversation"), 0o755)
	os.MkdirAll(filepath.Join(dir, strings.Repeat("b", 32)), 0o755)

	// A second process on the same directory sees the same conversation.
	e2 := newEnv(t, Config{ConversationsPath: dir})
	var after convInfo
	if code, raw := e2.do("GET", "/api/conversations/"+c.ID, nil, &after); code != 200 {
		t.Fatalf("after restart: %d %s", code, raw)
	}
	if after.CreatedAt != before.CreatedAt || after.UpdatedAt != before.UpdatedAt || after.ExecutionStatus != "paused" ||
		after.Title == nil || *after.Title != "kept" || after.Tags["a"] != "b" {
		t.Errorf("after restart %+v, before %+v", after, before)
	}
	var n int
	e2.do("GET", "/api/conversations/count", nil, &n)
	if n != 1 {
		t.Errorf("count after restart = %d", n)
	}
	// New events continue the numbering.
	e2.do("POST", "/api/conversations/"+c.ID+"/events", map[string]any{"content": []any{}}, nil)
	if events, _ := filepath.Glob(filepath.Join(dir, hex, "events", "event-00002-*.json")); len(events) != 1 {
		t.Errorf("third event not numbered 00002: %v", events)
	}
}

func TestTrajectory(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}})
	c := e.create(map[string]any{
		"agent": map[string]any{
			"kind": "Agent",
			"llm":  map[string]any{"model": "m", "api_key": "sk-live-secret", "base_url": "https://x"},
		},
		"secrets": map[string]any{"GITHUB_TOKEN": "gAAAAABfernetciphertext", "plain": "keep-me"},
		"initial_message": map[string]any{
			"role": "user", "content": []any{map[string]any{"type": "text", "text": "héllo"}},
		},
	})
	// Responses mask the key too.
	if bytes.Contains(c.Agent, []byte("sk-live-secret")) {
		t.Errorf("ConversationInfo leaks the api key: %s", c.Agent)
	}
	hex := strings.ReplaceAll(c.ID, "-", "")
	// A non-JSON file is copied byte for byte.
	odd := []byte("raw \x00 bytes sk-live-secret")
	if err := os.WriteFile(filepath.Join(e.dir, hex, "notes.txt"), odd, 0o644); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(4 * time.Second)

	req, _ := http.NewRequest("GET", e.srv.URL+"/api/file/download-trajectory/"+c.ID, nil)
	req.Header.Set("X-Session-API-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), hex+".zip") {
		t.Fatalf("download: %d %v", resp.StatusCode, resp.Header)
	}
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		if !strings.HasPrefix(f.Name, hex+"/") {
			t.Errorf("entry %q not rooted at %s/", f.Name, hex)
		}
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		files[strings.TrimPrefix(f.Name, hex+"/")] = b
	}
	if _, ok := files[""]; !ok {
		t.Error("no root directory entry")
	}
	for _, name := range []string{"meta.json", "base_state.json"} {
		b, ok := files[name]
		if !ok {
			t.Fatalf("%s missing; entries %v", name, keys(files))
		}
		if bytes.Contains(b, []byte("sk-live-secret")) || bytes.Contains(b, []byte("gAAAAAB")) {
			t.Errorf("%s not redacted: %s", name, b)
		}
		if !bytes.Contains(b, []byte(`"api_key": "**********"`)) {
			t.Errorf("%s: api_key not replaced in json.dumps style: %s", name, b)
		}
	}
	if b := files["base_state.json"]; !bytes.Contains(b, []byte(`"GITHUB_TOKEN": "**********"`)) || !bytes.Contains(b, []byte(`"plain": "keep-me"`)) {
		t.Errorf("secret sources: %s", b)
	}
	var evs []string
	for name, b := range files {
		if strings.HasPrefix(name, "events/event-") {
			evs = append(evs, name)
			// Unredacted files keep their original bytes.
			onDisk, err := os.ReadFile(filepath.Join(e.dir, hex, filepath.FromSlash(name)))
			if err != nil || !bytes.Equal(onDisk, b) {
				t.Errorf("%s changed though it holds no secret", name)
			}
		}
	}
	sort.Strings(evs)
	if len(evs) != 2 || !strings.HasPrefix(evs[0], "events/event-00000-") || !strings.HasPrefix(evs[1], "events/event-00001-") {
		t.Errorf("events in zip: %v", evs)
	}
	if !bytes.Equal(files["notes.txt"], odd) {
		t.Errorf("non-JSON file altered: %q", files["notes.txt"])
	}
	if got := e.idle(); got != 4 {
		t.Errorf("download moved the idle clock: %v", got)
	}
	if code, raw := e.do("GET", "/api/file/download-trajectory/"+strings.Repeat("c", 32), nil, nil); code != 404 || string(raw) != `{"detail":"Conversation not found"}` {
		t.Errorf("unknown: %d %s", code, raw)
	}
	if code, _ := e.do("GET", "/api/file/download-trajectory/zzz", nil, nil); code != 422 {
		t.Errorf("malformed: %d", code)
	}
	if code, _ := e.doKey("", "GET", "/api/file/download-trajectory/"+c.ID, nil, nil); code != 401 {
		t.Errorf("no key: %d", code)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestRedactJSON(t *testing.T) {
	cases := []struct{ in, out string }{
		{`{"z":1,"api_key":"s","a":[true,null,1.50]}`, `{"z": 1, "api_key": "**********", "a": [true, null, 1.50]}`},
		{`{"llm":{"aws_secret_access_key":{"nested":"x"},"aws_session_token":null}}`, `{"llm": {"aws_secret_access_key": "**********", "aws_session_token": null}}`},
		{`["gAAAAAxyz","ok","é😀"]`, `["**********", "ok", "\u00e9\ud83d\ude00"]`},
		{`{"llm_api_key":"k","s":"tab\there \"q\""}`, `{"llm_api_key": "**********", "s": "tab\there \"q\""}`},
	}
	for _, tc := range cases {
		out, changed, err := redactJSON([]byte(tc.in))
		if err != nil || !changed || string(out) != tc.out {
			t.Errorf("redact %s = %s, %v, %v; want %s", tc.in, out, changed, err, tc.out)
		}
	}
	if _, changed, err := redactJSON([]byte(`{"a":"b","api_key":"**********"}`)); err != nil || changed {
		t.Errorf("already redacted counts as changed: %v %v", changed, err)
	}
	if _, _, err := redactJSON([]byte(`{"a":`)); err == nil {
		t.Error("truncated JSON accepted")
	}
	if got := string(redactJSONL([]byte("{\"api_key\":\"x\"}\nnot json\n\n"))); got != "{\"api_key\": \"**********\"}\nnot json\n\n" {
		t.Errorf("jsonl = %q", got)
	}
}

func TestPyFloat(t *testing.T) {
	for v, want := range map[float64]string{0: "0.0", 12: "12.0", 1080: "1080.0", 0.5: "0.5", 1e20: "1e+20"} {
		b, err := json.Marshal(pyFloat(v))
		if err != nil || string(b) != want {
			t.Errorf("pyFloat(%v) = %s %v, want %s", v, b, err, want)
		}
	}
}

// detailOf is the detail of an error body, as a string or as JSON text.
func detailOf(b []byte) string {
	var d struct {
		Detail    json.RawMessage `json:"detail"`
		Exception *string         `json:"exception"`
	}
	json.Unmarshal(b, &d)
	var s string
	if json.Unmarshal(d.Detail, &s) == nil {
		if d.Exception != nil {
			return s + " / " + *d.Exception
		}
		return s
	}
	return string(d.Detail)
}
