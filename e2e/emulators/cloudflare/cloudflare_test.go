package cloudflare

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

const key = "bridge-key"

func newTest(t *testing.T, o Options) (*Server, *httptest.Server, *emulator.Clock) {
	t.Helper()
	clock := emulator.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o.Clock, o.Root = clock, t.TempDir()
	if o.Token == "" {
		o.Token = key
	}
	s := New(o)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Close(); srv.Close() })
	return s, srv, clock
}

func call(t *testing.T, srv *httptest.Server, method, path, auth string, body []byte) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func errCode(t *testing.T, b []byte) string {
	t.Helper()
	var e struct{ Error, Code string }
	if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
		t.Fatalf("not an {error, code} body: %s", b)
	}
	return e.Code
}

func TestAuthIDsAndLazyCreate(t *testing.T) {
	s, srv, _ := newTest(t, Options{})
	if code, b, _ := call(t, srv, "GET", "/health", "", nil); code != 200 || !strings.Contains(string(b), `"ok":true`) {
		t.Fatalf("health: %d %s", code, b)
	}
	for _, auth := range []string{"", "Bearer wrong", "Basic " + key} {
		code, b, _ := call(t, srv, "POST", "/v1/sandbox", auth, nil)
		if code != 401 || errCode(t, b) != "unauthorized" {
			t.Fatalf("auth %q: %d %s", auth, code, b)
		}
	}
	code, b, _ := call(t, srv, "POST", "/v1/sandbox", "bearer "+key, nil)
	var created struct{ ID string }
	json.Unmarshal(b, &created)
	if code != 200 || !idRE.MatchString(created.ID) || len(created.ID) != 26 {
		t.Fatalf("create: %d %s", code, b)
	}
	if _, ok := s.Container(created.ID); ok {
		t.Fatal("POST /v1/sandbox started a container")
	}
	for _, id := range []string{"UPPER", "has1digit", strings.Repeat("a", 129)} {
		code, b, _ := call(t, srv, "GET", "/v1/sandbox/"+id+"/running", "Bearer "+key, nil)
		if code != 400 || errCode(t, b) != "invalid_request" {
			t.Fatalf("id %q: %d %s", id, code, b)
		}
	}
	// DELETE never allocates; /running does.
	if code, _, _ := call(t, srv, "DELETE", "/v1/sandbox/"+created.ID, "Bearer "+key, nil); code != 204 {
		t.Fatalf("delete of an unstarted sandbox: %d", code)
	}
	if _, ok := s.Container(created.ID); ok {
		t.Fatal("DELETE allocated a container")
	}
	if code, b, _ := call(t, srv, "GET", "/v1/sandbox/"+created.ID+"/running", "Bearer "+key, nil); code != 200 || !strings.Contains(string(b), `"running":true`) {
		t.Fatalf("running: %d %s", code, b)
	}
	if _, ok := s.Container(created.ID); !ok {
		t.Fatal("/running did not start a container")
	}
}

func TestNoKeyMeansNoAuth(t *testing.T) {
	s := New(Options{Root: t.TempDir()})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	if code, _, _ := call(t, srv, "POST", "/v1/sandbox", "", nil); code != 200 {
		t.Fatalf("without SANDBOX_API_KEY: %d, want auth skipped", code)
	}
}

func TestExecSSEAndAgentStart(t *testing.T) {
	s, srv, _ := newTest(t, Options{})
	body, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", "cd /workspace && OH_SESSION_API_KEYS_0='k1' nohup agent &"}})
	code, b, h := call(t, srv, "POST", "/v1/sandbox/abc/exec", "Bearer "+key, body)
	if code != 200 || h.Get("Content-Type") != "text/event-stream" || !strings.Contains(string(b), "event: exit\ndata: {\"exit_code\":0}") {
		t.Fatalf("exec: %d %s %q", code, h.Get("Content-Type"), b)
	}
	if c, _ := s.Container("abc"); !c.Agent || c.AgentKey != "k1" {
		t.Fatalf("container %+v", c)
	}
	body, _ = json.Marshal(map[string]any{"argv": []string{"nosuch"}})
	if _, b, _ := call(t, srv, "POST", "/v1/sandbox/abc/exec", "Bearer "+key, body); !strings.Contains(string(b), `{"exit_code":127}`) {
		t.Fatalf("unknown command: %s", b)
	}
	for _, bad := range []string{`{"argv":[]}`, `{"argv":`} {
		if code, b, _ := call(t, srv, "POST", "/v1/sandbox/abc/exec", "Bearer "+key, []byte(bad)); code != 400 || errCode(t, b) != "invalid_request" {
			t.Fatalf("exec %s: %d %s", bad, code, b)
		}
	}
	body, _ = json.Marshal(map[string]any{"argv": []string{"true"}, "cwd": "../etc"})
	if code, _, _ := call(t, srv, "POST", "/v1/sandbox/abc/exec", "Bearer "+key, body); code != 403 {
		t.Fatalf("cwd outside /workspace: %d", code)
	}
}

func tarOf(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	return buf.Bytes()
}

// TestPersistHydrateAndCap: a persisted tar hydrates another sandbox;
// empty and over-32-MiB bodies are refused with the bridge's codes.
func TestPersistHydrateAndCap(t *testing.T) {
	_, srv, _ := newTest(t, Options{})
	if code, _, _ := call(t, srv, "POST", "/v1/sandbox/aaa/hydrate", "Bearer "+key, tarOf(t, map[string]string{"src/a.txt": "A"})); code != 200 {
		t.Fatalf("hydrate: %d", code)
	}
	code, tarball, _ := call(t, srv, "POST", "/v1/sandbox/aaa/persist", "Bearer "+key, nil)
	if code != 200 {
		t.Fatalf("persist: %d", code)
	}
	if code, _, _ := call(t, srv, "POST", "/v1/sandbox/bbb/hydrate", "Bearer "+key, tarball); code != 200 {
		t.Fatalf("hydrate b: %d", code)
	}
	if code, b, _ := call(t, srv, "GET", "/v1/sandbox/bbb/file/src/a.txt", "Bearer "+key, nil); code != 200 || string(b) != "A" {
		t.Fatalf("read back: %d %q", code, b)
	}
	if code, b, _ := call(t, srv, "GET", "/v1/sandbox/bbb/file/none", "Bearer "+key, nil); code != 404 || errCode(t, b) != "workspace_read_not_found" {
		t.Fatalf("missing file: %d %s", code, b)
	}
	if code, b, _ := call(t, srv, "POST", "/v1/sandbox/bbb/hydrate", "Bearer "+key, nil); code != 400 || errCode(t, b) != "invalid_request" {
		t.Fatalf("empty hydrate: %d %s", code, b)
	}
	big := make([]byte, MaxTarBytes+1)
	if code, b, _ := call(t, srv, "POST", "/v1/sandbox/bbb/hydrate", "Bearer "+key, big); code != 413 || errCode(t, b) != "payload_too_large" {
		t.Fatalf("33 MiB hydrate: %d %s", code, b)
	}
}

// TestSleepAndCapacity: an idle container sleeps on the clock and loses
// its files (or keeps them, the older reading); a full pool answers 503
// capacity_exceeded until a container sleeps.
func TestSleepAndCapacity(t *testing.T) {
	for _, keep := range []bool{false, true} {
		s, srv, clock := newTest(t, Options{MaxInstances: 1, SleepKeepsFiles: keep})
		call(t, srv, "PUT", "/v1/sandbox/aaa/file/work.txt", "Bearer "+key, []byte("w"))
		first, _ := s.Container("aaa")
		if code, b, _ := call(t, srv, "GET", "/v1/sandbox/bbb/running", "Bearer "+key, nil); code != 503 || errCode(t, b) != "capacity_exceeded" {
			t.Fatalf("full pool: %d %s", code, b)
		}
		clock.Advance(DefaultSleepAfter - time.Second)
		call(t, srv, "GET", "/v1/sandbox/aaa/running", "Bearer "+key, nil) // activity: the timer starts again
		clock.Advance(DefaultSleepAfter - time.Second)
		if c, ok := s.Container("aaa"); !ok || c.ID != first.ID {
			t.Fatal("a container with recent activity slept")
		}
		clock.Advance(2 * time.Second)
		if code, _, _ := call(t, srv, "GET", "/v1/sandbox/bbb/running", "Bearer "+key, nil); code != 200 {
			t.Fatalf("after aaa slept the pool is still full: %d", code)
		}
		if code, _, _ := call(t, srv, "DELETE", "/v1/sandbox/bbb", "Bearer "+key, nil); code != 204 {
			t.Fatalf("destroy bbb: %d", code)
		}
		code, b, _ := call(t, srv, "GET", "/v1/sandbox/aaa/file/work.txt", "Bearer "+key, nil)
		if code != 200 && code != 404 {
			t.Fatalf("read after the sleep: %d %s", code, b)
		}
		if got := code == 200 && string(b) == "w"; got != keep {
			t.Fatalf("keep %v: work.txt after the sleep %d %q", keep, code, b)
		}
		if _, err := os.Stat(filepath.Join(s.Dir(first.ID))); !os.IsNotExist(err) {
			t.Fatalf("the slept container's directory is still there: %v", err)
		}
	}
}

func TestTunnels(t *testing.T) {
	s, srv, clock := newTest(t, Options{AgentServer: func(cid string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "agent "+cid) })
	}})
	s.SetDomain("localhost:1")
	code, b, _ := call(t, srv, "POST", "/v1/sandbox/aaa/tunnel/8000", "Bearer "+key, nil)
	var tun Tunnel
	json.Unmarshal(b, &tun)
	if code != 200 || tun.Port != 8000 || !strings.HasSuffix(tun.Hostname, ".localhost:1") {
		t.Fatalf("tunnel: %d %s", code, b)
	}
	via := func() (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
		req.Host = tun.Hostname
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := via(); code != 502 {
		t.Fatalf("tunnel without an agent-server: %d", code)
	}
	body, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", "nohup agent &"}})
	call(t, srv, "POST", "/v1/sandbox/aaa/exec", "Bearer "+key, body)
	c, _ := s.Container("aaa")
	if code, got := via(); code != 200 || got != "agent "+c.ID {
		t.Fatalf("tunnel to the agent-server: %d %q", code, got)
	}
	clock.Advance(DefaultSleepAfter)
	if code, _ := via(); code != 502 {
		t.Fatalf("tunnel of a slept container: %d", code)
	}
}
