package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/boximage"
	"github.com/canvasapp/companion/internal/testsupport"
)

// TestKillNineMidDeleteRollsForward kills companion with SIGKILL while a
// delete is stopping a box that is slow to stop, then restarts it: the
// journaled delete must finish, and nothing else may be touched.
func TestKillNineMidDeleteRollsForward(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	slow, err := boximage.EnsureEnv(ctx, map[string]string{"EMULATOR_STOP_GRACE_SECONDS": "60"})
	if err != nil {
		t.Fatal(err)
	}
	proxy := newDockerProxy(t)
	opts := options{
		dataDir: t.TempDir(),
		args:    []string{"--docker-image", image, "--docker-scope", scope},
		env:     []string{"DOCKER_HOST=unix://" + proxy.path},
	}
	p := start(t, opts)
	s := p.dial(-1)
	s.next(10 * time.Second)

	var victim, bystander struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "victim", "options": map[string]string{"image": slow}}, &victim)
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "bystander"}, &bystander)
	vid, bid := victim.Workspace.ID, bystander.Workspace.ID
	v := p.waitState(vid, "running", 60*time.Second)
	b := p.waitState(bid, "running", 60*time.Second)

	p.deleteConfirmed(vid)
	s.waitFor("deleting", 10*time.Second, upsertOf(vid, "deleting"))
	// The box ignores SIGTERM for a minute, so once the engine has the
	// stop, the delete is in progress. Crash in the middle of it.
	proxy.waitStop(t, v.BoxID, 10*time.Second)
	p.kill()
	if !containerExists(t, v.BoxID) {
		t.Fatal("the box was gone before the crash; the test did not interrupt the delete")
	}

	p = start(t, opts)
	var list struct {
		Workspaces []workspace `json:"workspaces"`
	}
	p.must(200, "GET", "/v1/workspaces", nil, &list)
	s = p.dial(-1)
	s.waitFor("victim removed after restart", 90*time.Second, func(m wsMsg) bool {
		if m.Type == "snapshot" {
			for _, w := range m.Workspaces {
				if w.ID == vid {
					return false
				}
			}
			return true
		}
		return m.Type == "remove" && m.ID == vid
	})
	if containerExists(t, v.BoxID) {
		t.Fatal("interrupted delete did not finish after restart")
	}
	if !containerExists(t, b.BoxID) {
		t.Fatal("recovery deleted a bystander")
	}
	var got struct{ Workspace workspace }
	p.must(200, "GET", "/v1/workspaces/"+bid, nil, &got)
	if got.Workspace.State != "running" {
		t.Fatalf("bystander after recovery: %+v", got.Workspace)
	}
}

// TestContainerRemovedBehindCompanionsBack removes a box with the Docker
// Engine directly; the reconciler must report it, not crash or hide it.
func TestContainerRemovedBehindCompanionsBack(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", image, "--docker-scope", scope}})
	s := p.dial(-1)
	s.next(10 * time.Second)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "gone"}, &created)
	id := created.Workspace.ID
	w := s.waitFor("running", 60*time.Second, upsertOf(id, "running")).Workspace
	removeContainer(t, w.BoxID)
	m := s.waitFor("deleted", 30*time.Second, upsertOf(id, "deleted"))
	if !strings.Contains(m.Workspace.Error, "outside companion") {
		t.Fatalf("vanished box without an explanation: %s", m.Raw)
	}
	var e apiError
	p.must(409, "POST", "/v1/workspaces/"+id+"/pause", nil, &e)
	if e.Error.State != "deleted" {
		t.Fatalf("pause of a vanished box: %+v", e)
	}
	p.deleteConfirmed(id)
	s.waitFor("remove", 10*time.Second, func(m wsMsg) bool { return m.Type == "remove" && m.ID == id })
}

// dockerProxy forwards a unix socket to the real Docker Engine socket and
// can be cut, as if the engine went away. It records the request lines
// companion sends, so a test can wait for a call to be under way.
type dockerProxy struct {
	path string
	ln   net.Listener
	mu   sync.Mutex
	conn []net.Conn
	seen []string // "POST /v1.47/containers/ID/stop?t=60", in order
}

// requestLines is the writer side of a tee on companion's requests: it
// records each HTTP request line that passes.
type requestLines struct {
	dp   *dockerProxy
	line []byte
}

func (r *requestLines) Write(b []byte) (int, error) {
	for _, c := range b {
		if c != '\n' {
			if len(r.line) < 4096 {
				r.line = append(r.line, c)
			}
			continue
		}
		l := strings.TrimSuffix(string(r.line), "\r")
		r.line = r.line[:0]
		if method, rest, ok := strings.Cut(l, " "); ok && strings.HasSuffix(rest, " HTTP/1.1") &&
			strings.Trim(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
			r.dp.mu.Lock()
			r.dp.seen = append(r.dp.seen, method+" "+strings.TrimSuffix(rest, " HTTP/1.1"))
			r.dp.mu.Unlock()
		}
	}
	return len(b), nil
}

// waitStop waits until companion has asked the engine to stop container id.
func (dp *dockerProxy) waitStop(t *testing.T, id string, timeout time.Duration) {
	t.Helper()
	testsupport.Poll(t, timeout, func() error {
		dp.mu.Lock()
		defer dp.mu.Unlock()
		for _, l := range dp.seen {
			if strings.HasPrefix(l, "POST ") && strings.Contains(l, "/containers/"+id+"/stop") {
				return nil
			}
		}
		return fmt.Errorf("no stop of %s sent to the engine; requests seen: %d", id, len(dp.seen))
	})
}

func newDockerProxy(t *testing.T) *dockerProxy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "docker.sock")
	dp := &dockerProxy{path: path}
	dp.listen(t)
	t.Cleanup(dp.cut)
	return dp
}

func (dp *dockerProxy) listen(t *testing.T) {
	ln, err := net.Listen("unix", dp.path)
	if err != nil {
		t.Fatal(err)
	}
	dp.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", "/var/run/docker.sock")
			if err != nil {
				c.Close()
				continue
			}
			dp.mu.Lock()
			dp.conn = append(dp.conn, c, up)
			dp.mu.Unlock()
			go func() { io.Copy(up, io.TeeReader(c, &requestLines{dp: dp})); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// cut closes the socket and every connection through it.
func (dp *dockerProxy) cut() {
	dp.ln.Close()
	dp.mu.Lock()
	defer dp.mu.Unlock()
	for _, c := range dp.conn {
		c.Close()
	}
	dp.conn = nil
}

// TestEngineDisappearsMidAction cuts companion off from the Docker Engine
// while a pause is stopping a slow box. The action must fail with a clear
// error and lose nothing; when the engine is back, the reconciler reports
// the box's real state again.
func TestEngineDisappearsMidAction(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	slow, err := boximage.EnsureEnv(ctx, map[string]string{"EMULATOR_STOP_GRACE_SECONDS": "60"})
	if err != nil {
		t.Fatal(err)
	}
	proxy := newDockerProxy(t)
	p := start(t, options{
		dataDir: t.TempDir(),
		args:    []string{"--docker-image", image, "--docker-scope", scope},
		env:     []string{"DOCKER_HOST=unix://" + proxy.path},
	})
	s := p.dial(-1)
	s.next(10 * time.Second)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "cut", "options": map[string]string{"image": slow}}, &created)
	id := created.Workspace.ID
	w := s.waitFor("running", 60*time.Second, upsertOf(id, "running")).Workspace

	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	s.waitFor("pausing", 10*time.Second, upsertOf(id, "pausing"))
	// The box ignores SIGTERM for a minute: once the engine has the stop,
	// the pause is in progress until the cut.
	proxy.waitStop(t, w.BoxID, 10*time.Second)
	proxy.cut()

	failed := s.waitFor("pause failure reported", 90*time.Second, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.ID == id && m.Workspace.State != "pausing" && m.Workspace.Error != ""
	})
	if !strings.Contains(failed.Workspace.Error, "pause failed") || !strings.Contains(failed.Workspace.Error, "Docker Engine") {
		t.Fatalf("unclear failure: %s", failed.Raw)
	}
	var e apiError
	p.must(503, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "while-down"}, &e)
	if !strings.Contains(e.Error.Message, "Docker Engine") {
		t.Fatalf("create with the engine away: %+v", e)
	}

	proxy.listen(t)
	healed := s.waitFor("real state again", 90*time.Second, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.ID == id && m.Workspace.Error == "" &&
			(m.Workspace.State == "paused" || m.Workspace.State == "running")
	})
	if healed.Workspace.BoxID != w.BoxID || !containerExists(t, w.BoxID) {
		t.Fatalf("box lost after the engine came back: %s", healed.Raw)
	}
}

// TestProcessContract checks the process-level contract: --help, version,
// SIGTERM, and serve refusing a non-loopback address.
func TestProcessContract(t *testing.T) {
	out, err := exec.Command(companionBin, "desktop", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ready") || !strings.Contains(string(out), "-data-dir") {
		t.Fatalf("desktop --help: %v\n%s", err, out)
	}
	out, err = exec.Command(companionBin, "version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "companion e2e" {
		t.Fatalf("version: %q %v", out, err)
	}
	out, err = exec.Command(companionBin, "serve", "--listen", "0.0.0.0:0", "--data-dir", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "non-loopback") {
		t.Fatalf("serve on 0.0.0.0 was not refused: %v\n%s", err, out)
	}
	out, err = exec.Command(companionBin, "frobnicate").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unknown command") {
		t.Fatalf("unknown command: %v\n%s", err, out)
	}

	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.exit != nil {
			t.Fatalf("exit after SIGTERM: %v", p.exit)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}

	srv := start(t, options{mode: "serve", dataDir: t.TempDir(), args: []string{"--listen", "127.0.0.1:0", "--docker-scope", "unused"}})
	srv.must(200, "GET", "/v1/workspaces", nil, nil)
}

// TestStartsWithoutDockerEngine starts companion with no reachable Docker
// Engine: it must serve, and report the provider unavailable with the
// reason instead of crashing.
func TestStartsWithoutDockerEngine(t *testing.T) {
	p := start(t, options{
		dataDir: t.TempDir(),
		args:    []string{"--docker-scope", "unused"},
		env:     []string{"DOCKER_HOST=unix://" + filepath.Join(t.TempDir(), "no-engine.sock")},
	})
	var provs providerList
	p.must(200, "GET", "/v1/providers", nil, &provs)
	found := false
	for _, pr := range provs.Providers {
		if pr.Name == "docker" {
			found = true
			if pr.Available || !strings.Contains(pr.Reason, "not reachable") || !strings.Contains(pr.Reason, "DOCKER_HOST") {
				t.Fatalf("docker status without an engine: %+v", pr)
			}
		}
	}
	if !found {
		t.Fatalf("docker provider not listed: %+v", provs)
	}
	var e apiError
	p.must(503, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "x"}, &e)
	if !strings.Contains(e.Error.Message, "Docker Engine") {
		t.Fatalf("create without an engine: %+v", e)
	}
	p.stop()
}

// TestDataDirGuards: one companion per data dir, and a data dir keeps the
// docker scope it was created with.
func TestDataDirGuards(t *testing.T) {
	data := t.TempDir()
	p := start(t, options{dataDir: data, args: []string{"--docker-scope", "scope-a"}})
	second := exec.Command(companionBin, "desktop", "--data-dir", data, "--docker-scope", "scope-a")
	stdin, _ := second.StdinPipe() // stays open: the parent app is alive
	defer stdin.Close()
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another companion") {
		t.Fatalf("a second companion on the same data dir was not refused: %v\n%s", err, out)
	}
	p.stop()

	wrong := exec.Command(companionBin, "desktop", "--data-dir", data, "--docker-scope", "scope-b")
	stdin2, _ := wrong.StdinPipe()
	defer stdin2.Close()
	out, err = wrong.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "start with --docker-scope scope-a") {
		t.Fatalf("starting with another docker scope was not refused: %v\n%s", err, out)
	}
	// The right scope still works.
	start(t, options{dataDir: data, args: []string{"--docker-scope", "scope-a"}}).stop()
}

// TestListenAddresses: the ready line names the address actually bound,
// and serve answers to the extra hosts it is told about.
func TestListenAddresses(t *testing.T) {
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		ln.Close()
		p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused", "--listen", "[::1]:0"}})
		if !strings.HasPrefix(p.ready.URL, "http://[::1]:") {
			t.Fatalf("ready URL for an IPv6 listener: %s", p.ready.URL)
		}
		p.must(200, "GET", "/v1/workspaces", nil, nil)
		p.stop()
	}
	srv := start(t, options{mode: "serve", dataDir: t.TempDir(), args: []string{"--listen", "127.0.0.1:0", "--docker-scope", "unused", "--allow-host", "companion.internal.test"}})
	req, _ := http.NewRequest("GET", srv.ready.URL+"/v1/workspaces", nil)
	req.Host = "companion.internal.test"
	req.Header.Set("Authorization", "Bearer "+srv.ready.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("serve with --allow-host: %v %v", resp, err)
	}
	resp.Body.Close()
	req.Host = "other.internal.test"
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("serve answered a host it was not told about: %v %v", resp, err)
	}
	resp.Body.Close()
}
