package e2e

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/e2e/emulators/runtimeapi"
	"github.com/canvasapp/companion/internal/testsupport"
)

// TestRuntimeAPIThroughWasmModule drives the runtimeapi module, run in
// the companion binary, against the OpenHands runtime-api emulator: add an
// account, create, reach the runtime's agent-server through companion
// with the key the runtime-api issued, pause (the runtime url answers 503,
// companion says paused), resume (a new key: companion uses it, the old
// one is refused, the workspace keeps its box), another user's runtime on
// the same key is never adopted, the runtime-api's idle reaper pauses it
// on its own, and a delete exports the workspace through the agent-server
// first, then stops the runtime.
func TestRuntimeAPIThroughWasmModule(t *testing.T) {
	// One agent-server process stands behind every runtime url; the
	// emulator checks X-Session-API-Key in front of it, as the key the
	// runtime-api injects would have the agent-server do.
	agent := startAgentServer(t, t.TempDir())
	rp := httputil.NewSingleHostReverseProxy(agent)
	rt := runtimeapi.New(runtimeapi.Options{Token: cloudToken, Clock: emulator.NewWallClock(),
		AgentServer: func(string) http.Handler { return rp }})
	srv := httptest.NewServer(rt.Handler())
	t.Cleanup(func() { rt.Close(); srv.Close() })
	rt.SetBaseURL(srv.URL)
	other := rt.Seed(runtimeapi.Runtime{SessionID: "9b7c2e4a-another-user", User: "someone-else"})

	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	config := map[string]string{"api_url": srv.URL, "image": "ghcr.io/openhands/agent-server:e2e", "runtime_hosts": "127.0.0.1"}
	var e apiError
	p.must(502, "POST", "/v1/accounts", map[string]any{"provider": "runtimeapi", "label": "wrong", "config": config,
		"credentials": map[string]string{"token": "not-the-token"}}, &e)
	if e.Error.Code != "provider_unauthorized" {
		t.Fatalf("wrong token: %+v", e)
	}
	var acct struct {
		Account struct {
			ID string `json:"id"`
		} `json:"account"`
	}
	raw := p.must(201, "POST", "/v1/accounts", map[string]any{"provider": "runtimeapi", "label": "openhands", "config": config,
		"credentials": map[string]string{"token": cloudToken}}, &acct)
	if bytes.Contains(raw, []byte(cloudToken)) {
		t.Fatalf("add account answered %s", raw)
	}

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct.Account.ID, "name": "runtime"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", 60*time.Second).BoxID
	first, ok := rt.Session(box)
	if !ok || !strings.HasSuffix(box, id) {
		t.Fatalf("box %s is no session of the emulator, or does not name workspace %s", box, id)
	}
	agentOK := func(what string) {
		t.Helper()
		testsupport.Poll(t, 30*time.Second, func() error {
			code, raw := p.call("GET", "/v1/workspaces/"+id+"/agent/api/conversations/search", nil, nil)
			if code != 200 {
				return &agentErr{what, code, string(raw)}
			}
			return nil
		})
	}
	agentOK("before the pause")
	direct := func(key string) int {
		req, _ := http.NewRequest("GET", srv.URL+"/"+first.RuntimeID+"/api/conversations/search", nil)
		req.Header.Set("X-Session-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", 60*time.Second)
	p.must(409, "GET", "/v1/workspaces/"+id+"/agent", nil, nil)
	if code := direct(first.SessionAPIKey); code != 503 {
		t.Fatalf("the paused runtime's url answered %d, want 503", code)
	}

	p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	if again := p.waitState(id, "running", 60*time.Second); again.BoxID != box {
		t.Fatalf("resume moved the workspace from box %s to %s", box, again.BoxID)
	}
	second, _ := rt.Session(box)
	if second.SessionAPIKey == first.SessionAPIKey || second.RuntimeID != first.RuntimeID {
		t.Fatal("the resume did not rotate the key on the same runtime")
	}
	agentOK("after the resume, with the new key")
	if code := direct(first.SessionAPIKey); code != 401 {
		t.Fatalf("the key from before the resume answered %d, want 401", code)
	}

	// Another user's runtime on the same key is never adopted nor touched.
	var list struct {
		Workspaces []workspace `json:"workspaces"`
	}
	p.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 1 {
		t.Fatalf("%d workspaces, want only the one companion made: %+v", len(list.Workspaces), list.Workspaces)
	}
	for _, r := range rt.Requests().All() {
		if strings.Contains(r.Path, other.SessionID) || strings.Contains(r.Path, other.RuntimeID) {
			t.Fatalf("%s %s touched another user's runtime", r.Method, r.Path)
		}
	}

	// The runtime-api's own reaper pauses the idle runtime; companion sees
	// it paused on its next list, without acting on it.
	rt.Clock().Advance(runtimeapi.DefaultIdleAfter + time.Minute)
	if w := p.waitState(id, "paused", 60*time.Second); w.BoxID != box {
		t.Fatalf("after the reaper the workspace is on box %s, want %s", w.BoxID, box)
	}
	if n := len(rt.Requests().Matching("POST", "/pause")); n != 1 {
		t.Fatalf("%d pause requests, want 1 (companion's): the reaper paused this one", n)
	}

	// Delete exports first (required: the account's default), through
	// the agent-server with the key of the moment, then stops the runtime.
	p.deleteConfirmed(id)
	p.waitRemoved(id, 2*time.Minute)
	if r, _ := rt.Session(box); r.Status != runtimeapi.StatusStopped {
		t.Fatalf("the runtime is %s after the delete, want stopped", r.Status)
	}
	exps := p.verifiedExports(id)
	if len(exps) == 0 || exps[0].ArchiveSHA256 == nil {
		t.Fatalf("verified exports of the deleted workspace: %+v", exps)
	}
	// The pause exported first (the paused_reaper clock), and the delete
	// woke the reaper-paused runtime for its export: a second rotation,
	// whose key companion used too.
	a := p.auditOf(id)
	if !auditHas(a, "", "export", "before a pause") || !auditHas(a, "", "resume", "woken for the export before its delete") {
		t.Errorf("audit lacks the export before the pause or the wake before the delete: %+v", a)
	}
	if n := len(rt.Requests().Matching("POST", "/resume")); n != 2 {
		t.Errorf("%d resumes, want 2 (companion's, and the wake for the delete's export)", n)
	}
	if e := p.deleteAudit(id); e.Outcome != "ok" || e.ExportSHA256 == nil {
		t.Fatalf("delete audit entry %+v, want ok with the export's SHA-256", e)
	}
	p.stop()
	if strings.Contains(p.stderr.String(), cloudToken) || strings.Contains(p.stderr.String(), second.SessionAPIKey) {
		t.Fatal("a token or session key in companion's logs")
	}
}

type agentErr struct {
	what string
	code int
	body string
}

func (e *agentErr) Error() string { return e.what + ": " + http.StatusText(e.code) + " " + e.body }

// startAgentServer runs the agent-server emulator with dir as the box's
// "/" (and /workspace in it), taking any session key.
func startAgentServer(t *testing.T, dir string) *url.URL {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "workspace", "notes.txt"), []byte("kept by the export\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(agentServerBin(t))
	cmd.Dir = dir
	cmd.Env = []string{"EMULATOR_LISTEN=127.0.0.1:0", "EMULATOR_PURE_GIT=1", "EMULATOR_FS_ROOT=" + dir, "EMULATOR_SEED_REPO=/workspace/repo"}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := agentAddrRE.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), "listening") {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case a := <-addr:
		u, _ := url.Parse("http://" + a)
		return u
	case <-time.After(20 * time.Second):
		t.Fatal("the agent-server emulator did not start")
	}
	return nil
}
