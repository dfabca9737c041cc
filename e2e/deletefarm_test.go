package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
)

// The delete pipeline's cloud tests run the Daytona emulator with a real
// agent-server emulator process behind each sandbox's preview port: the
// module reports the preview URL, companion reaches the box through the
// emulator's proxy, and the agent-server answers from a directory that
// stands for the box's disk: it runs with EMULATOR_FS_ROOT=<box dir>, so
// the box's /workspace is <box dir>/workspace for every route.

var (
	agentBinOnce sync.Once
	agentBin     string
	agentBinErr  error
)

// agentServerBin builds the agent-server emulator once per test binary.
func agentServerBin(t *testing.T) string {
	t.Helper()
	agentBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "companion-e2e-agentserver-")
		if err != nil {
			agentBinErr = err
			return
		}
		agentBin = filepath.Join(dir, "agentserver")
		cmd := exec.Command("go", "build", "-o", agentBin, "./agentserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentBinErr = fmt.Errorf("build the agent-server emulator: %v\n%s", err, out)
		}
	})
	if agentBinErr != nil {
		t.Fatal(agentBinErr)
	}
	return agentBin
}

// archiveFault is a reply the box's edge gives the archive route instead
// of the agent-server's, count times (429 and 503 with Retry-After).
type archiveFault struct {
	status     int
	retryAfter string
	count      int
}

// boxSetup is how one sandbox's agent-server behaves; set it before the
// box's first proxied request.
type boxSetup struct {
	// key, when set, is the key the agent-server accepts instead of the
	// one companion put in the sandbox's env (so it answers 401).
	key string
	// archiveAt points /workspace in archive requests elsewhere in the
	// box: "file" at /a-file (a regular file: 400, nothing to archive),
	// "missing" at /not-there (404).
	archiveAt string
	faults    []archiveFault
	// noSeed starts the agent-server without a seeded repository at
	// /workspace/repo (the test lays the workspace out itself).
	noSeed bool
	// noShell answers the bash routes 404, as a box without them would.
	noShell bool
}

// farm is the Daytona emulator plus one agent-server process per sandbox,
// with one ordered log of every request that reached either.
type farm struct {
	t    *testing.T
	dt   *daytona.Server
	srv  *httptest.Server
	root string

	mu    sync.Mutex
	log   []string // "METHOD host path?query -> status", in completion order
	procs map[string]*url.URL
	setup map[string]*boxSetup
	// refuse answers provider API requests whose path ends with a key
	// with that status instead of the emulator's answer.
	refuse map[string]int
	// noSeed is boxSetup.noSeed for every box (set before any starts).
	noSeed bool
}

var agentAddrRE = regexp.MustCompile(`addr=(\S+)`)

func newFarm(t *testing.T) *farm {
	f := &farm{t: t, root: t.TempDir(), procs: map[string]*url.URL{}, setup: map[string]*boxSetup{}}
	bin := agentServerBin(t)
	f.dt = daytona.New(daytona.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{},
		AgentServer: func(id string) http.Handler { return f.agent(bin, id) }})
	inner := f.dt.Handler()
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &codeWriter{ResponseWriter: w, code: 200}
		if code := f.refused(r.URL.Path); code != 0 {
			http.Error(sw, `{"message":"refused by the test"}`, code)
		} else {
			inner.ServeHTTP(sw, r)
		}
		f.mu.Lock()
		f.log = append(f.log, fmt.Sprintf("%s %s %s -> %d", r.Method, r.Host, r.URL.RequestURI(), sw.code))
		f.mu.Unlock()
	}))
	t.Cleanup(func() { f.dt.Close(); f.srv.Close() })
	u, _ := url.Parse(f.srv.URL)
	f.dt.SetProxy("http", "localhost:"+u.Port())
	return f
}

type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(c int) { w.code = c; w.ResponseWriter.WriteHeader(c) }

// Flush lets streamed downloads through.
func (w *codeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// refuseAt makes provider API requests whose path ends with suffix
// answer status (0: answer normally again).
func (f *farm) refuseAt(suffix string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse == nil {
		f.refuse = map[string]int{}
	}
	f.refuse[suffix] = status
}

func (f *farm) refused(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for suffix, code := range f.refuse {
		if code != 0 && strings.HasSuffix(path, suffix) {
			return code
		}
	}
	return 0
}

// box returns the setup of a sandbox, made on first use.
func (f *farm) box(id string) *boxSetup {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.setup[id]
	if b == nil {
		b = &boxSetup{}
		f.setup[id] = b
	}
	return b
}

// agent is the handler behind a sandbox's port 8000: faults, the
// archiveAt redirection, then the sandbox's own agent-server process.
func (f *farm) agent(bin, id string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dir := filepath.Join(f.root, id)
		target, err := f.process(bin, id, dir)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		f.mu.Lock()
		noShell := f.setup[id] != nil && f.setup[id].noShell
		f.mu.Unlock()
		if noShell && strings.HasPrefix(r.URL.Path, "/api/bash/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"detail":"Not Found"}`)
			return
		}
		if r.URL.Path == "/api/file/archive" {
			f.mu.Lock()
			b := f.setup[id]
			var fault *archiveFault
			if b != nil && len(b.faults) > 0 {
				fault = &b.faults[0]
				if fault.count--; fault.count <= 0 {
					b.faults = b.faults[1:]
				}
			}
			at := ""
			if b != nil {
				at = b.archiveAt
			}
			f.mu.Unlock()
			if fault != nil {
				if fault.retryAfter != "" {
					w.Header().Set("Retry-After", fault.retryAfter)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(fault.status)
				io.WriteString(w, `{"detail":"injected by the test"}`)
				return
			}
			q := r.URL.Query()
			if p := q.Get("path"); at != "" && (p == "/workspace" || strings.HasPrefix(p, "/workspace/")) {
				base := map[string]string{"file": "/a-file", "missing": "/not-there"}[at]
				q.Set("path", base+strings.TrimPrefix(p, "/workspace"))
				r.URL.RawQuery = q.Encode()
			}
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	})
}

// process starts the sandbox's agent-server on first use, with the key
// companion set in the sandbox's env (or the box's override).
func (f *farm) process(bin, id, dir string) (*url.URL, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u := f.procs[id]; u != nil {
		return u, nil
	}
	sb, ok := f.dt.Sandbox(id)
	if !ok {
		return nil, fmt.Errorf("no sandbox %s", id)
	}
	key := sb.Env["OH_SESSION_API_KEYS_0"]
	if b := f.setup[id]; b != nil && b.key != "" {
		key = b.key
	}
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "a-file"), []byte("not a directory"), 0o644); err != nil {
		return nil, err
	}
	// The box's "/" is dir: the process runs there (conversations go to
	// /workspace/conversations, as in the box image) and takes every path
	// under it.
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = []string{"EMULATOR_LISTEN=127.0.0.1:0", "OH_SESSION_API_KEYS_0=" + key, "EMULATOR_PURE_GIT=1",
		"EMULATOR_FS_ROOT=" + dir}
	if b := f.setup[id]; !f.noSeed && (b == nil || !b.noSeed) {
		cmd.Env = append(cmd.Env, "EMULATOR_SEED_REPO=/workspace/repo")
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
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
		f.procs[id] = u
		return u, nil
	case <-time.After(20 * time.Second):
		return nil, fmt.Errorf("agent-server of %s did not start", id)
	}
}

// requests returns the log so far.
func (f *farm) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// order checks, from the request log, that box's archive was read
// (answered 200) before its provider DELETE, and that the DELETE
// happened at all when deleted is true.
func (f *farm) order(t *testing.T, box string, deleted bool) {
	t.Helper()
	archive, del := -1, -1
	host := "8000-" + box + "."
	for i, l := range f.requests() {
		switch {
		case strings.Contains(l, host) && strings.Contains(l, "/api/file/archive") && strings.HasSuffix(l, "-> 200"):
			if del < 0 {
				archive = i
			}
		case strings.HasPrefix(l, "DELETE ") && strings.Contains(l, "/sandbox/"+box) && !strings.Contains(l, host):
			if del < 0 {
				del = i
			}
		}
	}
	if deleted && del < 0 {
		t.Fatalf("no provider DELETE of %s in the log:\n%s", box, strings.Join(f.requests(), "\n"))
	}
	if !deleted && del >= 0 {
		t.Fatalf("box %s was deleted at the provider:\n%s", box, strings.Join(f.requests(), "\n"))
	}
	if deleted && (archive < 0 || archive > del) {
		t.Fatalf("box %s: provider DELETE (request %d) without a verified archive read before it (request %d):\n%s", box, del, archive, strings.Join(f.requests(), "\n"))
	}
}

// gone reports whether the emulator no longer has the box.
func (f *farm) gone(box string) bool {
	sb, ok := f.dt.Sandbox(box)
	return !ok || sb.State == daytona.StateDestroyed
}

// account adds a Daytona account on the farm to p and returns its id.
func (f *farm) account(p *proc) string {
	var acct struct{ Account struct{ ID string } }
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "daytona", "label": "farm", "config": map[string]string{"api_url": f.srv.URL + "/api", "proxy_hosts": "*.localhost"},
		"credentials": map[string]string{"token": cloudToken},
	}, &acct)
	return acct.Account.ID
}

// converse starts a conversation in the box through its agent-server, so
// its export has a trajectory.
func (f *farm) converse(t *testing.T, box string) {
	t.Helper()
	u, err := f.process(agentServerBin(t), box, filepath.Join(f.root, box))
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := f.dt.Sandbox(box)
	startConversation(t, u.String(), sb.Env["OH_SESSION_API_KEYS_0"], "before delete")
}

// previewAndDeleteCrashing is deleteConfirmed for a companion armed to
// crash at an early step: the crash may come before the answer is
// written, so the delete request may end without one (a 202 or a broken
// connection are both fine; any other answer is not).
func previewAndDeleteCrashing(p *proc, id string) {
	p.t.Helper()
	var pv deletePreview
	p.must(200, "POST", "/v1/workspaces/"+id+"/delete-preview", nil, &pv)
	body := strings.NewReader(`{"token":"` + pv.Token + `"}`)
	req, err := http.NewRequest("POST", p.ready.URL+"/v1/workspaces/"+id+"/delete", body)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return // the process died before it answered
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		p.t.Fatalf("delete answered %d, want 202", resp.StatusCode)
	}
}

// deletePreview is the wire form of a delete preview.
type deletePreview struct {
	Token    string   `json:"token"`
	Lost     []string `json:"lost"`
	Survives []string `json:"survives"`
	Export   struct {
		Will        bool     `json:"will"`
		Why         string   `json:"why"`
		Mode        string   `json:"mode"`
		Captures    []string `json:"captures"`
		Format      string   `json:"format"`
		ArchivePath string   `json:"archive_path"`
		Wake        bool     `json:"wake"`
		Snapshot    bool     `json:"snapshot"`
		Location    string   `json:"location"`
	} `json:"export"`
}

// deleteConfirmed deletes id the way a person does: the preview, then the
// delete with the preview's token (answered 202). The delete goes on in
// the background. It returns the preview.
func (p *proc) deleteConfirmed(id string) deletePreview {
	p.t.Helper()
	var pv deletePreview
	p.must(200, "POST", "/v1/workspaces/"+id+"/delete-preview", nil, &pv)
	p.must(202, "POST", "/v1/workspaces/"+id+"/delete", map[string]string{"token": pv.Token}, nil)
	return pv
}

// waitRemoved polls until the workspace is gone from the API.
func (p *proc) waitRemoved(id string, timeout time.Duration) {
	p.t.Helper()
	testsupport.Poll(p.t, timeout, func() error {
		code, raw := p.call("GET", "/v1/workspaces/"+id, nil, nil)
		if code == 404 {
			return nil
		}
		return fmt.Errorf("workspace %s still there: %d %s", id, code, raw)
	})
}

// waitBlocked polls until the workspace's error says its delete was
// blocked, and returns it.
func (p *proc) waitBlocked(id string, timeout time.Duration) workspace {
	p.t.Helper()
	var got struct{ Workspace workspace }
	testsupport.Poll(p.t, timeout, func() error {
		code, raw := p.call("GET", "/v1/workspaces/"+id, nil, &got)
		if code == 200 && strings.HasPrefix(got.Workspace.Error, "delete blocked: ") && got.Workspace.State != "deleting" {
			return nil
		}
		return fmt.Errorf("workspace %s not blocked: %d %s", id, code, raw)
	})
	return got.Workspace
}

// verifiedExports lists the workspace's verified exports.
func (p *proc) verifiedExports(id string) []exportRec {
	p.t.Helper()
	var list struct{ Exports []exportRec }
	p.must(200, "GET", "/v1/workspaces/"+id+"/exports", nil, &list)
	var out []exportRec
	for _, e := range list.Exports {
		if e.Verified {
			out = append(out, e)
		}
	}
	return out
}

// auditOf returns the audit entries of a workspace, newest first.
func (p *proc) auditOf(id string) []auditEntry {
	p.t.Helper()
	var page struct{ Entries []auditEntry }
	p.must(200, "GET", "/v1/audit?limit=500", nil, &page)
	var out []auditEntry
	for _, e := range page.Entries {
		if e.WorkspaceID == id {
			out = append(out, e)
		}
	}
	return out
}

// deleteOutcome is the newest delete outcome entry (not "started").
func deleteOutcome(entries []auditEntry) (auditEntry, bool) {
	for _, e := range entries {
		if e.Action == "delete" && e.Outcome != "started" {
			return e, true
		}
	}
	return auditEntry{}, false
}

// deleteAudit waits for the delete's outcome entry: it is appended just
// after the workspace's last change is published.
func (p *proc) deleteAudit(id string) auditEntry {
	p.t.Helper()
	var e auditEntry
	testsupport.Poll(p.t, 30*time.Second, func() error {
		var ok bool
		if e, ok = deleteOutcome(p.auditOf(id)); !ok {
			return fmt.Errorf("no delete outcome audited for %s yet", id)
		}
		return nil
	})
	return e
}

var _ = strconv.Itoa
