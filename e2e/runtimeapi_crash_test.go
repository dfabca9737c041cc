package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/e2e/emulators/runtimeapi"
	"github.com/canvasapp/companion/internal/testsupport"
)

// apiGate stands in front of the runtime-api emulator. Once armed, it
// holds the next request to method and path until its client goes away
// (companion is killed): before the emulator sees it, or after the
// emulator acted on it, its answer kept from companion. It reports the
// hold on reached, so a test kills companion exactly there.
type apiGate struct {
	next    http.Handler
	reached chan string

	mu     sync.Mutex
	method string
	path   string
	after  bool
}

func (g *apiGate) arm(method, path string, after bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.method, g.path, g.after = method, path, after
}

func (g *apiGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	// A path starting with "*" matches by suffix (an id not known yet).
	hold := g.path != "" && r.Method == g.method && (r.URL.Path == g.path ||
		strings.HasPrefix(g.path, "*") && strings.HasSuffix(r.URL.Path, g.path[1:]))
	after := g.after
	if hold {
		g.method, g.path = "", ""
	}
	g.mu.Unlock()
	if !hold {
		g.next.ServeHTTP(w, r)
		return
	}
	// Read the whole body: the server notices a client that went away
	// only once it has.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if after {
		r.Body = io.NopCloser(bytes.NewReader(body))
		g.next.ServeHTTP(httptest.NewRecorder(), r)
	}
	g.reached <- r.Method + " " + r.URL.Path
	<-r.Context().Done()
}

// runtimeAPIFarm is the runtime-api emulator behind an apiGate, with one
// agent-server process behind every runtime url.
type runtimeAPIFarm struct {
	t      *testing.T
	rt     *runtimeapi.Server
	url    string
	gate   *apiGate
	config map[string]string
}

// newRuntimeAPIFarm starts it; envKey picks the reading of whether /start
// keeps the session key given in the environment.
func newRuntimeAPIFarm(t *testing.T, envKey bool) *runtimeAPIFarm {
	t.Helper()
	rp := httputil.NewSingleHostReverseProxy(startAgentServer(t, t.TempDir()))
	rt := runtimeapi.New(runtimeapi.Options{Token: cloudToken, Clock: emulator.NewWallClock(), EnvKey: envKey,
		AgentServer: func(string) http.Handler { return rp }})
	gate := &apiGate{next: rt.Handler(), reached: make(chan string, 1)}
	srv := httptest.NewServer(gate)
	t.Cleanup(func() { rt.Close(); srv.Close() })
	rt.SetBaseURL(srv.URL)
	return &runtimeAPIFarm{t: t, rt: rt, url: srv.URL, gate: gate,
		config: map[string]string{"api_url": srv.URL, "image": "ghcr.io/openhands/agent-server:e2e", "runtime_hosts": "127.0.0.1"}}
}

// account adds the runtime-api account to p and returns its id.
func (f *runtimeAPIFarm) account(p *proc) string {
	f.t.Helper()
	var acct struct {
		Account struct {
			ID string `json:"id"`
		} `json:"account"`
	}
	p.must(201, "POST", "/v1/accounts", map[string]any{"provider": "runtimeapi", "label": "openhands", "config": f.config,
		"credentials": map[string]string{"token": cloudToken}}, &acct)
	return acct.Account.ID
}

// waitHeld waits until the gate holds a request.
func (f *runtimeAPIFarm) waitHeld() {
	f.t.Helper()
	select {
	case held := <-f.gate.reached:
		f.t.Logf("holding %s; killing companion", held)
	case <-time.After(90 * time.Second):
		f.t.Fatal("companion never made the request to crash at")
	}
}

// direct calls the agent-server of session sid's runtime at its url with
// key, as a client holding that key would, and returns the status.
func (f *runtimeAPIFarm) direct(sid, key string) int {
	f.t.Helper()
	u, ok := f.rt.URL(sid)
	if !ok {
		f.t.Fatalf("no runtime for session %s", sid)
	}
	req, _ := http.NewRequest("GET", u+"/api/conversations/search", nil)
	req.Header.Set("X-Session-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// runtimesOf returns the emulator's runtimes of session sid, stopped ones
// included.
func (f *runtimeAPIFarm) runtimesOf(sid string) []runtimeapi.Runtime {
	var out []runtimeapi.Runtime
	for _, r := range f.rt.Runtimes() {
		if r.SessionID == sid {
			out = append(out, r)
		}
	}
	return out
}

// settledLists waits until companion has listed the runtime-api n more
// times: by then a reconcile that would adopt a runtime has run.
func (f *runtimeAPIFarm) settledLists(n int) {
	f.t.Helper()
	before := len(f.rt.Requests().Matching("GET", "/list"))
	testsupport.Poll(f.t, 60*time.Second, func() error {
		if got := len(f.rt.Requests().Matching("GET", "/list")) - before; got < n {
			return fmt.Errorf("%d lists of %d", got, n)
		}
		return nil
	})
}

// agentThroughCompanion waits until workspace id's agent-server answers
// through companion (which adds the key of the moment).
func agentThroughCompanion(p *proc, id, what string) {
	p.t.Helper()
	testsupport.Poll(p.t, 30*time.Second, func() error {
		code, raw := p.call("GET", "/v1/workspaces/"+id+"/agent/api/conversations/search", nil, nil)
		if code != 200 {
			return &agentErr{what, code, string(raw)}
		}
		return nil
	})
}

// onlyWorkspace checks that companion has exactly workspace id, on box.
func onlyWorkspace(p *proc, id, box string) {
	p.t.Helper()
	var list struct {
		Workspaces []workspace `json:"workspaces"`
	}
	p.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 1 || list.Workspaces[0].ID != id || list.Workspaces[0].BoxID != box {
		p.t.Fatalf("workspaces %+v, want only %s on box %s", list.Workspaces, id, box)
	}
}

// streamRunning reads the stream until it shows workspace id running and
// fails on any message about another workspace: a runtime adopted as a
// second workspace, or the workspace under a new id.
func streamRunning(s *stream, id string) workspace {
	s.t.Helper()
	var got workspace
	s.waitFor(id+" running on the stream", 90*time.Second, func(m wsMsg) bool {
		ws := m.Workspaces
		if m.Workspace != nil {
			ws = append(ws, *m.Workspace)
		}
		if m.Type == "remove" && m.ID != "" {
			s.t.Fatalf("the stream removed %s", m.ID)
		}
		for _, w := range ws {
			if w.ID != id {
				s.t.Fatalf("the stream shows workspace %s (box %s), want only %s", w.ID, w.BoxID, id)
			}
			if w.State == "running" {
				got = w
				return true
			}
		}
		return false
	})
	return got
}

// TestRuntimeAPIKillNineMidCreate crashes companion (SIGKILL) while a
// runtime-api create is under way: before /start reaches the runtime-api,
// and after the runtime-api started the runtime but before companion has
// its answer. Restarted on the same data dir, companion finishes the
// journaled create: exactly one runtime exists for the workspace (the
// retried create finds the one started by its session id, and starts no
// second), the workspace ends running on it with its agent-server
// reachable, and nothing is adopted as a second workspace.
func TestRuntimeAPIKillNineMidCreate(t *testing.T) {
	for _, c := range []struct {
		name  string
		after bool
	}{
		{"before /start reaches the runtime-api", false},
		{"after /start, before companion has the answer", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newRuntimeAPIFarm(t, false)
			opts := options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}}
			p := start(t, opts)
			acct := f.account(p)
			f.gate.arm("POST", "/start", c.after)
			var created struct{ Workspace workspace }
			p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "crashed"}, &created)
			id := created.Workspace.ID
			sid := "companion-" + acct + "-" + id
			f.waitHeld()
			p.kill()
			if n := len(f.runtimesOf(sid)); n != map[bool]int{false: 0, true: 1}[c.after] {
				t.Fatalf("%d runtimes of %s at the crash", n, sid)
			}

			p = start(t, opts)
			s := p.dial(-1)
			w := streamRunning(s, id)
			if w.BoxID != sid {
				t.Fatalf("the workspace runs on box %q, want its session id %s", w.BoxID, sid)
			}
			agentThroughCompanion(p, id, "after the crash")
			f.settledLists(2)
			onlyWorkspace(p, id, sid)
			rts := f.runtimesOf(sid)
			if len(rts) != 1 || rts[0].Status != runtimeapi.StatusRunning || len(f.rt.Runtimes()) != 1 {
				t.Fatalf("runtimes of %s: %+v (of %d in all), want one running", sid, rts, len(f.rt.Runtimes()))
			}
			if n := len(f.rt.Requests().Matching("POST", "/start")); n != 1 {
				t.Fatalf("the runtime-api got %d starts, want 1", n)
			}
			a := p.auditOf(id)
			if !auditHas(a, "recovery", "create", "ok") {
				t.Errorf("audit lacks the recovered create's success: %+v", a)
			}

			// Nothing is left half-done: another start leaves it as it was.
			p.stop()
			p = start(t, opts)
			var again struct{ Workspace workspace }
			p.must(200, "GET", "/v1/workspaces/"+id, nil, &again)
			if again.Workspace.State != "running" || again.Workspace.BoxID != sid {
				t.Fatalf("after another restart: %+v", again.Workspace)
			}
			f.settledLists(2)
			onlyWorkspace(p, id, sid)
			if n := len(f.rt.Requests().Matching("POST", "/start")); n != 1 || len(f.rt.Runtimes()) != 1 {
				t.Fatalf("after another restart: %d starts, %d runtimes", n, len(f.rt.Runtimes()))
			}
		})
	}
}

// TestRuntimeAPIKeyRotationAndKillNineMidResume runs the key rotation
// under both readings of whether /start keeps the session key companion
// passes in the environment (the reference marks it uncertain): the
// runtime starts with the runtime-api's own key or with companion's, and
// every resume replaces it. Then it crashes companion (SIGKILL) during a
// resume: after the runtime-api resumed the runtime (a new key) but
// before companion has the answer, or before /resume reaches the
// runtime-api. Restarted on the same data dir, companion finishes the
// journaled resume with exactly one /resume in all: the workspace runs on
// the same box, the stream keeps its id, companion reaches the
// agent-server with the newest key, and every older key is refused.
func TestRuntimeAPIKeyRotationAndKillNineMidResume(t *testing.T) {
	for _, c := range []struct {
		name   string
		envKey bool
		after  bool // crash after the runtime-api resumed, else before it saw /resume
	}{
		{"the runtime-api's own key, crash after /resume", false, true},
		{"the key from the environment, crash after /resume", true, true},
		{"the runtime-api's own key, crash before /resume", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newRuntimeAPIFarm(t, c.envKey)
			opts := options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}}
			p := start(t, opts)
			acct := f.account(p)
			var created struct{ Workspace workspace }
			p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "rotated"}, &created)
			id := created.Workspace.ID
			box := p.waitState(id, "running", 60*time.Second).BoxID
			first, ok := f.rt.Session(box)
			if !ok {
				t.Fatalf("box %s is no session of the emulator", box)
			}
			envKey := first.Environment["OH_SESSION_API_KEYS_0"]
			if envKey == "" || (first.SessionAPIKey == envKey) != c.envKey {
				t.Fatalf("the runtime's key is companion's: %v, want %v (companion sent one: %v)",
					first.SessionAPIKey == envKey, c.envKey, envKey != "")
			}
			agentThroughCompanion(p, id, "before the pause")

			// A resume replaces the key, whichever it was.
			p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
			p.waitState(id, "paused", 60*time.Second)
			p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
			if w := p.waitState(id, "running", 60*time.Second); w.BoxID != box {
				t.Fatalf("the resume moved the workspace from box %s to %s", box, w.BoxID)
			}
			second, _ := f.rt.Session(box)
			if second.SessionAPIKey == first.SessionAPIKey || second.SessionAPIKey == envKey || second.RuntimeID != first.RuntimeID {
				t.Fatal("the resume did not rotate the key on the same runtime")
			}
			agentThroughCompanion(p, id, "after the resume, with the new key")
			if code := f.direct(box, first.SessionAPIKey); code != 401 {
				t.Fatalf("the key from before the resume answered %d, want 401", code)
			}

			// Crash in the middle of the next resume.
			p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
			p.waitState(id, "paused", 60*time.Second)
			f.gate.arm("POST", "/resume", c.after)
			p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
			f.waitHeld()
			p.kill()
			if at, _ := f.rt.Session(box); c.after != (at.Status == runtimeapi.StatusRunning && at.SessionAPIKey != second.SessionAPIKey) {
				t.Fatalf("at the crash the runtime is %s (key rotated: %v); the runtime-api saw the resume: %v",
					at.Status, at.SessionAPIKey != second.SessionAPIKey, c.after)
			}

			p = start(t, opts)
			s := p.dial(-1)
			if w := streamRunning(s, id); w.BoxID != box {
				t.Fatalf("after the crash the workspace runs on box %s, want %s", w.BoxID, box)
			}
			agentThroughCompanion(p, id, "after the crash, with the newest key")
			for what, key := range map[string]string{"first": first.SessionAPIKey, "second": second.SessionAPIKey} {
				if code := f.direct(box, key); code != 401 {
					t.Fatalf("the %s key answered %d after the crash, want 401", what, code)
				}
			}
			third, _ := f.rt.Session(box)
			if third.SessionAPIKey == second.SessionAPIKey || third.SessionAPIKey == first.SessionAPIKey || third.RuntimeID != first.RuntimeID {
				t.Fatalf("after the restart the runtime is %s: its key was not rotated, or it is another runtime", third.RuntimeID)
			}
			f.settledLists(2)
			onlyWorkspace(p, id, box)
			if n := len(f.rt.Requests().Matching("POST", "/resume")); n != 2 {
				t.Fatalf("the runtime-api got %d resumes, want 2 (the restart neither lost nor repeated the second)", n)
			}
			if len(f.rt.Runtimes()) != 1 {
				t.Fatalf("%d runtimes, want 1", len(f.rt.Runtimes()))
			}
			if a := p.auditOf(id); !auditHas(a, "recovery", "resume", "ok") {
				t.Errorf("audit lacks the recovered resume's success: %+v", a)
			}
			p.stop()
			for _, k := range []string{cloudToken, first.SessionAPIKey, second.SessionAPIKey, third.SessionAPIKey} {
				if strings.Contains(p.stderr.String(), k) {
					t.Fatal("a token or session key in companion's logs")
				}
			}
		})
	}
}
