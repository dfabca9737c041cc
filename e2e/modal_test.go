package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
	modalemu "github.com/canvasapp/companion/e2e/emulators/modal"
	"github.com/canvasapp/companion/internal/testsupport"
	"google.golang.org/grpc/codes"
)

const (
	modalTokenID     = "ak-e2etokenid"
	modalTokenSecret = "as-e2e-modal-token-secret"
)

// modalFarm is the Modal emulator with agent-servers behind its tunnels:
// one agent-server process per filesystem lineage, so a sandbox resumed
// from a snapshot sees the files of the sandbox the snapshot was taken
// of, and a fresh sandbox gets a fresh one.
type modalFarm struct {
	t   *testing.T
	emu *modalemu.Server

	mu     sync.Mutex
	agents map[string]*httputil.ReverseProxy // by the lineage's first sandbox
	dirs   map[string]string                 // each lineage's "/"
}

func newModalFarm(t *testing.T) *modalFarm {
	t.Helper()
	f := &modalFarm{t: t, agents: map[string]*httputil.ReverseProxy{}, dirs: map[string]string{}}
	f.emu = modalemu.New(modalemu.Options{TokenID: modalTokenID, TokenSecret: modalTokenSecret,
		Clock: emulator.NewFakeClock(time.Now().UTC()), AgentServer: f.agent})
	if err := f.emu.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.emu.Close)
	return f
}

// root follows a sandbox's image back through the snapshots it came from.
func (f *modalFarm) root(id string) string {
	for range 100 {
		sb, ok := f.emu.Sandbox(id)
		if !ok {
			return id
		}
		if sb.RestoredFrom != "" {
			id = sb.RestoredFrom
			continue
		}
		im, ok := f.emu.Image(sb.ImageID)
		if !ok || im.Snapshot == "" {
			return id
		}
		id = im.Snapshot
	}
	return id
}

func (f *modalFarm) agent(id string) http.Handler {
	root := f.root(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	if rp, ok := f.agents[root]; ok {
		return rp
	}
	dir := f.t.TempDir()
	rp := httputil.NewSingleHostReverseProxy(startAgentServer(f.t, dir))
	f.agents[root], f.dirs[root] = rp, dir
	return rp
}

// fileOf reads name under /workspace of box's filesystem ("" if none).
func (f *modalFarm) fileOf(box, name string) string {
	f.mu.Lock()
	dir := f.dirs[f.root(box)]
	f.mu.Unlock()
	if dir == "" {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(dir, "workspace", name))
	return string(b)
}

// writeFile writes name under /workspace of box's filesystem, which must
// have been reached already.
func (f *modalFarm) writeFile(box, name, body string) {
	f.t.Helper()
	f.mu.Lock()
	dir := f.dirs[f.root(box)]
	f.mu.Unlock()
	if dir == "" {
		f.t.Fatalf("box %s was never reached", box)
	}
	if err := os.WriteFile(filepath.Join(dir, "workspace", name), []byte(body), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// account adds a Modal account pointed at the emulator.
func (f *modalFarm) account(p *proc) string {
	p.t.Helper()
	var acct struct {
		Account struct {
			ID string `json:"id"`
		} `json:"account"`
	}
	raw := p.must(201, "POST", "/v1/accounts", map[string]any{"provider": "modal", "label": "modal",
		"config":      map[string]string{"server_url": f.emu.URL(), "app_name": "companion-e2e"},
		"credentials": map[string]string{"token_id": modalTokenID, "token_secret": modalTokenSecret}}, &acct)
	if bytes.Contains(raw, []byte(modalTokenSecret)) {
		p.t.Fatalf("add account answered %s", raw)
	}
	return acct.Account.ID
}

// direct calls a sandbox's agent-server through its tunnel with key.
func (f *modalFarm) direct(t *testing.T, box, key string) (int, error) {
	t.Helper()
	u, err := f.tunnelURL(box)
	if err != nil {
		return 0, err
	}
	req, _ := http.NewRequest("GET", u+"/api/conversations/search", nil)
	req.Header.Set("X-Session-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (f *modalFarm) tunnelURL(box string) (string, error) {
	u, ok := f.emu.TunnelAddr(box)
	if !ok {
		return "", fmt.Errorf("sandbox %s has no tunnel", box)
	}
	return "http://" + u, nil
}

// TestModalThroughBuiltinAdapter drives the built-in modal adapter, in the
// companion binary, against the Modal gRPC emulator through the real SDK:
// the provider is listed with its capabilities and documented settings; a
// wrong token is refused; create reaches the agent-server through the
// sandbox's tunnel; companion's timers open no tunnel connection; pause
// exports first (the snapshot_expiry clock), snapshots and terminates;
// resume makes a new sandbox (new box id, url and key on the stream under
// the same workspace id; the old key is refused, the old tunnel gone, the
// files kept); nothing is adopted twice; delete exports, terminates and
// deletes the snapshot.
func TestModalThroughBuiltinAdapter(t *testing.T) {
	f := newModalFarm(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})

	var provs struct {
		Providers []struct {
			Name         string          `json:"name"`
			Kind         string          `json:"kind"`
			Capabilities map[string]bool `json:"capabilities"`
			Config       []struct {
				Name, Description, Example string
			} `json:"config"`
			Credentials []struct{ Name string } `json:"credentials"`
			Clocks      []struct{ Name string } `json:"clocks"`
		} `json:"providers"`
	}
	p.must(200, "GET", "/v1/providers", nil, &provs)
	found := false
	for _, pr := range provs.Providers {
		if pr.Name != "modal" {
			continue
		}
		found = true
		c := pr.Capabilities
		if pr.Kind != "builtin" || !c["suspend"] || !c["suspend_keeps_files"] || c["suspend_keeps_memory"] || c["resume_same_identity"] || !c["list"] || !c["delete"] {
			t.Errorf("modal in the provider list: %+v", pr)
		}
		for _, cf := range pr.Config {
			if cf.Description == "" || cf.Example == "" {
				t.Errorf("modal setting %s lacks a description or example", cf.Name)
			}
		}
		if len(pr.Credentials) != 2 || len(pr.Clocks) != 2 || pr.Clocks[0].Name != "lifetime" || pr.Clocks[1].Name != "snapshot_expiry" {
			t.Errorf("modal credentials %+v, clocks %+v", pr.Credentials, pr.Clocks)
		}
	}
	if !found {
		t.Fatalf("GET /v1/providers lists no modal: %+v", provs)
	}

	var e apiError
	p.must(502, "POST", "/v1/accounts", map[string]any{"provider": "modal", "label": "wrong",
		"config":      map[string]string{"server_url": f.emu.URL()},
		"credentials": map[string]string{"token_id": modalTokenID, "token_secret": "as-not-the-secret"}}, &e)
	if e.Error.Code != "provider_unauthorized" || strings.Contains(e.Error.Message, "as-not-the-secret") {
		t.Fatalf("wrong token: %+v", e)
	}
	p.must(400, "POST", "/v1/accounts", map[string]any{"provider": "modal", "label": "bad url",
		"config":      map[string]string{"server_url": "http://modal.example.com"},
		"credentials": map[string]string{"token_id": modalTokenID, "token_secret": modalTokenSecret}}, &e)
	if !strings.Contains(e.Error.Message, "loopback") {
		t.Errorf("plain http to a remote host: %+v", e)
	}
	acct := f.account(p)

	s := p.dial(0)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "modal box"}, &created)
	id := created.Workspace.ID
	first := p.waitState(id, "running", time.Minute)
	if !strings.HasPrefix(first.BoxID, "sb-") {
		t.Fatalf("box %q is not a Modal sandbox id", first.BoxID)
	}
	sb, _ := f.emu.Sandbox(first.BoxID)
	if sb.IdleTimeout != 30*time.Minute || sb.Timeout != 24*time.Hour || sb.Tags["companion.workspace"] != id {
		t.Errorf("sandbox settings: idle %s, timeout %s, tags %v", sb.IdleTimeout, sb.Timeout, sb.Tags)
	}
	oldKey := sb.Env["OH_SESSION_API_KEYS_0"]
	oldTunnel, _ := f.tunnelURL(first.BoxID)
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
	agentOK("after create")
	f.writeFile(first.BoxID, "work.txt", "kept by the snapshot\n")

	// Companion's own timers (the reconciler lists every second) never
	// open a tunnel connection: only the person's requests above did.
	hits := f.emu.TunnelRequests(first.BoxID)
	lists := f.emu.Calls("SandboxList")
	testsupport.Poll(t, 30*time.Second, func() error {
		if n := f.emu.Calls("SandboxList"); n < lists+3 {
			return fmt.Errorf("%d lists since, want 3", n-lists)
		}
		return nil
	})
	if n := f.emu.TunnelRequests(first.BoxID); n != hits {
		t.Fatalf("%d tunnel requests while nobody acted, want none", n-hits)
	}

	// Pause: export first (the snapshot_expiry clock), then snapshot and
	// terminate.
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	paused := p.waitState(id, "paused", time.Minute)
	if paused.BoxID != first.BoxID {
		t.Fatalf("pause moved the box from %s to %s", first.BoxID, paused.BoxID)
	}
	sb, _ = f.emu.Sandbox(first.BoxID)
	snap := sb.Tags["companion.snapshot"]
	if im, ok := f.emu.Image(snap); sb.State != modalemu.StateTerminated || !ok || im.Deleted || im.ExpiresAt.IsZero() {
		t.Fatalf("after the pause: sandbox %s, snapshot %q %+v", sb.State, snap, im)
	}
	if a := p.auditOf(id); !auditHas(a, "", "export", "before a pause") {
		t.Errorf("no export before the pause: %+v", a)
	}
	p.must(409, "GET", "/v1/workspaces/"+id+"/agent", nil, nil)

	// Resume: a new sandbox, announced under the same workspace id.
	p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	m := s.waitFor("the resumed workspace on the stream", time.Minute, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.ID == id && m.Workspace.State == "running" && m.Workspace.BoxID != first.BoxID
	})
	second := m.Workspace
	if !strings.HasPrefix(second.BoxID, "sb-") {
		t.Fatalf("resumed onto %q", second.BoxID)
	}
	nsb, _ := f.emu.Sandbox(second.BoxID)
	newKey := nsb.Env["OH_SESSION_API_KEYS_0"]
	if newKey == "" || newKey == oldKey || nsb.Tags["companion.resumed_from"] != first.BoxID {
		t.Fatalf("the new sandbox: key changed %v, tags %v", newKey != oldKey, nsb.Tags)
	}
	newTunnel, _ := f.tunnelURL(second.BoxID)
	if newTunnel == oldTunnel || first.BoxURL != oldTunnel || second.BoxURL != newTunnel {
		t.Fatalf("box urls %q then %q, want the tunnels %q then %q", first.BoxURL, second.BoxURL, oldTunnel, newTunnel)
	}
	agentOK("after the resume, with the new key")
	if code, err := f.direct(t, second.BoxID, oldKey); err != nil || code != 401 {
		t.Fatalf("the old key at the new sandbox: %d %v, want 401", code, err)
	}
	if code, err := f.direct(t, second.BoxID, newKey); err != nil || code != 200 {
		t.Fatalf("the new key: %d %v", code, err)
	}
	if resp, err := http.Get(oldTunnel + "/alive"); err == nil {
		resp.Body.Close()
		t.Fatalf("the old sandbox's tunnel still answers %d", resp.StatusCode)
	}
	if f.root(second.BoxID) != first.BoxID || f.fileOf(second.BoxID, "work.txt") != "kept by the snapshot\n" {
		t.Fatal("the resumed sandbox does not come from the paused one's snapshot")
	}
	if im, _ := f.emu.Image(snap); !im.Deleted {
		t.Error("the snapshot resumed from was not cleaned up")
	}

	// Nothing adopted twice: one workspace, one running sandbox.
	var list struct{ Workspaces []workspace }
	p.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 1 {
		t.Fatalf("%d workspaces, want 1: %+v", len(list.Workspaces), list.Workspaces)
	}
	running := 0
	for _, x := range f.emu.Sandboxes() {
		if x.State == modalemu.StateRunning {
			running++
		}
	}
	if running != 1 {
		t.Fatalf("%d running sandboxes, want 1", running)
	}

	// Delete exports through the new sandbox, terminates it and deletes
	// its snapshot.
	p.deleteConfirmed(id)
	p.waitRemoved(id, 2*time.Minute)
	if x, _ := f.emu.Sandbox(second.BoxID); x.State != modalemu.StateTerminated {
		t.Fatalf("the sandbox is %s after the delete", x.State)
	}
	exps := p.verifiedExports(id)
	if len(exps) == 0 || exps[0].ArchiveSHA256 == nil {
		t.Fatalf("verified exports of the deleted workspace: %+v", exps)
	}
	if e := p.deleteAudit(id); e.Outcome != "ok" || e.ExportSHA256 == nil {
		t.Fatalf("delete audit entry %+v", e)
	}
	p.stop()
	if strings.Contains(p.stderr.String(), modalTokenSecret) || strings.Contains(p.stderr.String(), newKey) ||
		strings.Contains(s.seen.String(), newKey) {
		t.Fatal("the token secret or a box key in companion's logs or stream")
	}
}

// TestModalSnapshotExpiry: Modal's own clock. A paused workspace's
// snapshot expires (the emulator's clock moved past its 30-day TTL); the
// workspace shows deleted by the provider, naming the export its pause
// took first, and that export restores it into a new Modal sandbox.
func TestModalSnapshotExpiry(t *testing.T) {
	f := newModalFarm(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	acct := f.account(p)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "expiring"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", time.Minute).BoxID
	agentThroughCompanion(p, id, "before the pause")
	f.writeFile(box, "work.txt", "work kept only by the export\n")
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	ws := p.waitClock(id, "paused with an export", time.Minute, func(c clockState) bool {
		return c.State == "paused" && c.LastExportID != ""
	})
	if ws.Deletion.Clock != "snapshot_expiry" || ws.Deletion.AtRisk || ws.Deletion.DueAt == nil {
		t.Errorf("deletion of the paused workspace: %+v", ws.Deletion)
	}

	f.emu.Clock().Advance(31 * 24 * time.Hour)
	gone := p.waitClock(id, "deleted by the provider", time.Minute, func(c clockState) bool { return c.State == "deleted" })
	if !strings.Contains(gone.Error, ws.LastExportID) {
		t.Errorf("the expired workspace's error %q does not name export %s", gone.Error, ws.LastExportID)
	}
	code, raw := p.call("POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	if code/100 == 2 {
		// Accepted: the resume must fail with the reason, not hang.
		got := p.waitClock(id, "resume refused", time.Minute, func(c clockState) bool { return c.State == "deleted" && strings.Contains(c.Error, "expired") })
		_ = got
	} else if !strings.Contains(string(raw), "deleted") && !strings.Contains(string(raw), "expired") {
		t.Errorf("resume of the expired workspace: %d %s", code, raw)
	}
	restored, pv := p.restoreInto(exportRec{ID: ws.LastExportID}, acct, "files")
	if pv.Method != "files" || !strings.HasPrefix(restored.BoxID, "sb-") {
		t.Errorf("restore: %+v %+v", restored, pv)
	}
	if got := f.fileOf(restored.BoxID, "work.txt"); got != "work kept only by the export\n" {
		t.Errorf("the restored sandbox has work.txt %q", got)
	}
}

// TestModalHostileAnswers: Modal's errors and odd answers become clear
// errors and no stuck state. A refusal with a megabyte of message fails
// the create with a short message; ResourceExhausted twice is retried
// until the create succeeds; a tunnel with a malformed host is refused
// when the agent is reached, and the workspace stays running.
func TestModalHostileAnswers(t *testing.T) {
	f := newModalFarm(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	acct := f.account(p)
	s := p.dial(0)

	f.emu.AddFault(&modalemu.Fault{Method: "SandboxCreate", Code: codes.PermissionDenied, Message: strings.Repeat("no ", 1<<20), Count: 1})
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "refused"}, &created)
	failed := s.waitFor("create failed", time.Minute, upsertOf(created.Workspace.ID, "error")).Workspace
	if failed.BoxID != "" || !strings.Contains(failed.Error, "Modal denied it") || len(failed.Error) > 2000 {
		t.Fatalf("refused create: box %q, error of %d bytes: %.200s", failed.BoxID, len(failed.Error), failed.Error)
	}

	f.emu.AddFault(&modalemu.Fault{Method: "SandboxCreate", Code: codes.ResourceExhausted, Message: "too many sandboxes", Count: 2})
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "throttled"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", 2*time.Minute).BoxID
	if n := f.emu.Calls("SandboxCreate"); n != 4 {
		t.Errorf("%d SandboxCreate calls, want 4 (the refused one, two throttled, one made)", n)
	}
	if len(f.running(id)) != 1 {
		t.Fatalf("running sandboxes of the throttled workspace: %+v", f.running(id))
	}

	f.emu.SetTunnelHost("evil.example/../x?")
	code, raw := p.call("GET", "/v1/workspaces/"+id+"/agent/api/conversations/search", nil, nil)
	if code/100 != 5 || !strings.Contains(string(raw), "no usable tunnel") {
		t.Fatalf("agent through a malformed tunnel: %d %s", code, raw)
	}
	f.emu.SetTunnelHost("")
	agentThroughCompanion(p, id, "with the tunnel right again")
	if w := p.waitState(id, "running", time.Minute); w.BoxID != box {
		t.Fatalf("the workspace moved to %s", w.BoxID)
	}
}

// TestModalMemorySnapshotResume: an account with memory_snapshot on
// pauses with a memory snapshot too, and resumes into a sandbox restored
// from it: a new box under the same workspace, its agent-server (with its
// files) reachable through companion.
func TestModalMemorySnapshotResume(t *testing.T) {
	f := newModalFarm(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	var acct struct {
		Account struct {
			ID string `json:"id"`
		} `json:"account"`
	}
	p.must(201, "POST", "/v1/accounts", map[string]any{"provider": "modal", "label": "modal memory",
		"config":      map[string]string{"server_url": f.emu.URL(), "memory_snapshot": "true"},
		"credentials": map[string]string{"token_id": modalTokenID, "token_secret": modalTokenSecret}}, &acct)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct.Account.ID, "name": "memory"}, &created)
	id := created.Workspace.ID
	first := p.waitState(id, "running", time.Minute).BoxID
	agentThroughCompanion(p, id, "after create")
	f.writeFile(first, "work.txt", "in memory and on disk\n")
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", time.Minute)
	p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	w := p.waitState(id, "running", time.Minute)
	sb, _ := f.emu.Sandbox(w.BoxID)
	if w.BoxID == first || sb.RestoredFrom != first {
		t.Fatalf("resumed onto %s restored from %q, want a new sandbox restored from %s", w.BoxID, sb.RestoredFrom, first)
	}
	agentThroughCompanion(p, id, "after the memory resume")
	if got := f.fileOf(w.BoxID, "work.txt"); got != "in memory and on disk\n" {
		t.Fatalf("the restored sandbox has work.txt %q", got)
	}
}

// TestModalIdleTimeoutEndsTheBox: Modal terminates an idle sandbox on its
// own (idle_timeout, set at create) and keeps no snapshot. companion,
// which opened no tunnel connection meanwhile, sees the workspace deleted
// by the provider, with its files lost.
func TestModalIdleTimeoutEndsTheBox(t *testing.T) {
	f := newModalFarm(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	acct := f.account(p)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "idle"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", time.Minute).BoxID
	f.emu.Clock().Advance(30*time.Minute + time.Second)
	gone := p.waitClock(id, "deleted by Modal", time.Minute, func(c clockState) bool { return c.State == "deleted" })
	if sb, _ := f.emu.Sandbox(box); sb.Result.String() != "GENERIC_STATUS_IDLE_TIMEOUT" || f.emu.TunnelRequests(box) != 0 {
		t.Fatalf("sandbox ended %s after %d tunnel requests; want an idle timeout and none", sb.Result, f.emu.TunnelRequests(box))
	}
	if !strings.Contains(gone.Error, "lost") {
		t.Errorf("the idled-out workspace says %q; want that its files are lost", gone.Error)
	}
}
