package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/internal/testsupport"
)

type retentionAnswer struct {
	Retention struct {
		Enabled           bool  `json:"enabled"`
		PausedForSeconds  int64 `json:"paused_for_seconds"`
		WarnBeforeSeconds int64 `json:"warn_before_seconds"`
	} `json:"retention"`
	Scheduler struct {
		ScheduledDeletion bool  `json:"scheduled_deletion"`
		Ticks             int64 `json:"ticks"`
	} `json:"scheduler"`
}

type retentionPreview struct {
	Workspaces []struct {
		ID        string    `json:"id"`
		DeleteAt  time.Time `json:"delete_at"`
		SizeBytes *int64    `json:"size_bytes"`
	} `json:"workspaces"`
	ReclaimBytes      int64    `json:"reclaim_bytes"`
	MonthlySavings    *float64 `json:"monthly_savings"`
	ScheduledDeletion bool     `json:"scheduled_deletion"`
}

func (p *proc) retentionAudit() []auditEntry {
	p.t.Helper()
	var pg auditPage
	p.must(200, "GET", "/v1/audit?limit=500", nil, &pg)
	var out []auditEntry
	for _, e := range pg.Entries {
		if e.Actor == "retention" {
			out = append(out, e)
		}
	}
	return out
}

// createRunning creates Docker workspaces and waits until they run.
func (p *proc) createRunning(names ...string) map[string]workspace {
	p.t.Helper()
	out := map[string]workspace{}
	for _, name := range names {
		var created struct{ Workspace workspace }
		p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": name}, &created)
		out[name] = created.Workspace
	}
	for name, w := range out {
		out[name] = p.waitState(w.ID, "running", 90*time.Second)
	}
	return out
}

func (p *proc) pauseAndWait(id string) workspace {
	p.t.Helper()
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	return p.waitState(id, "paused", 60*time.Second)
}

// holdGate is an HTTP proxy in front of the Docker Engine socket that,
// once armed with a pattern, holds the next request whose path matches it
// until the test releases it, and says when it holds one.
type holdGate struct {
	path    string
	mu      sync.Mutex
	match   *regexp.Regexp
	reached chan string
	release chan struct{}
}

func newHoldGate(t *testing.T) *holdGate {
	t.Helper()
	g := &holdGate{path: filepath.Join(t.TempDir(), "docker.sock"), reached: make(chan string, 1), release: make(chan struct{})}
	ln, err := net.Listen("unix", g.path)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: "http", Host: "docker"}) },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", "/var/run/docker.sock")
		}},
		FlushInterval: -1,
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		held := g.match != nil && g.match.MatchString(r.URL.Path)
		if held {
			g.match = nil // only the first one
		}
		g.mu.Unlock()
		if held {
			g.reached <- r.Method + " " + r.URL.Path
			select {
			case <-g.release:
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return g
}

func (g *holdGate) arm(pattern string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.match = regexp.MustCompile(pattern)
}

// TestRetentionServe, through the binary in serve mode and real Docker:
// the dry run lists the paused workspaces a policy would delete; once the
// policy is on, the tick deletes exactly those (each announced by a
// retention_warning notice and scheduled with delete_after on the stream
// first), and leaves the kept and the running workspace alone. Then a
// workspace that was resumed at the engine after companion saw it paused
// is skipped by the re-check under its lock, not deleted: the engine is
// asked about the box after the tick claimed it, and the test starts the
// box at the engine just then (a resume after the claim, before the
// delete). Every decision is in the audit trail as "retention".
func TestRetentionServe(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	// One reconcile pass at start only: the outside resume below must be
	// news to companion when the tick re-checks.
	gate := newHoldGate(t)
	p := start(t, options{mode: "serve", dataDir: t.TempDir(), args: []string{"--listen", "127.0.0.1:0", "--docker-image", image,
		"--docker-scope", scope, "--retention-interval", "200ms", "--reconcile-interval", "1h"},
		env: []string{"DOCKER_HOST=unix://" + gate.path}})
	ws := p.createRunning("due1", "due2", "kept", "running", "resumed")
	for _, name := range []string{"due1", "due2", "kept"} {
		ws[name] = p.pauseAndWait(ws[name].ID)
	}
	p.must(200, "PUT", "/v1/workspaces/"+ws["kept"].ID+"/keep", map[string]bool{"keep": true}, nil)
	s := p.dial(-1)
	s.next(10 * time.Second) // snapshot

	var pv retentionPreview
	p.must(200, "POST", "/v1/accounts/local-docker/retention/preview",
		map[string]any{"paused_for_seconds": 1, "storage_price_per_gib_month": 0.1}, &pv)
	var listed []string
	for _, w := range pv.Workspaces {
		listed = append(listed, w.ID)
	}
	sort.Strings(listed)
	want := []string{ws["due1"].ID, ws["due2"].ID}
	sort.Strings(want)
	if !slices.Equal(listed, want) || !pv.ScheduledDeletion || pv.MonthlySavings == nil {
		t.Fatalf("preview %+v; want exactly the two paused, unkept workspaces %v, scheduled deletion on, a money figure", pv, want)
	}

	var ans retentionAnswer
	p.must(200, "PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": 1}, &ans)
	if !ans.Retention.Enabled || ans.Retention.WarnBeforeSeconds != 86400 || !ans.Scheduler.ScheduledDeletion {
		t.Fatalf("PUT answered %+v; want enabled, default warning of a day, scheduled deletion on", ans)
	}

	// Each listed workspace: scheduled (upsert with delete_after), warned
	// (notice), then removed, in that order on the stream.
	seen := map[string][]string{}
	s.waitFor("both scheduled workspaces removed", 60*time.Second, func(m wsMsg) bool {
		switch {
		case m.Type == "upsert" && m.Workspace.DeleteAfter != nil:
			seen[m.Workspace.ID] = append(seen[m.Workspace.ID], "scheduled")
		case m.Type == "notice":
			var n struct {
				Kind        string     `json:"kind"`
				WorkspaceID string     `json:"workspace_id"`
				DeleteAfter *time.Time `json:"delete_after"`
			}
			if err := json.Unmarshal(m.Raw, &n); err != nil || n.Kind != "retention_warning" || n.DeleteAfter == nil {
				t.Errorf("notice %s: %v", m.Raw, err)
			}
			seen[n.WorkspaceID] = append(seen[n.WorkspaceID], "warned")
		case m.Type == "remove":
			seen[m.ID] = append(seen[m.ID], "removed")
		}
		return slices.Contains(seen[want[0]], "removed") && slices.Contains(seen[want[1]], "removed")
	})
	for _, id := range want {
		var firsts []string // each event's first time, in order
		for _, ev := range seen[id] {
			if !slices.Contains(firsts, ev) {
				firsts = append(firsts, ev)
			}
		}
		got := strings.Join(firsts, ",")
		if got != "scheduled,warned,removed" {
			t.Errorf("%s on the stream: %s; want scheduled,warned,removed", id, got)
		}
	}
	for _, name := range []string{"kept", "running", "resumed"} {
		var got struct{ Workspace workspace }
		p.must(200, "GET", "/v1/workspaces/"+ws[name].ID, nil, &got)
		if got.Workspace.DeleteAfter != nil {
			t.Errorf("%s carries delete_after %v", name, got.Workspace.DeleteAfter)
		}
	}
	// The outcome entry follows the remove on the stream.
	testsupport.Poll(t, 30*time.Second, func() error {
		var deleted []string
		for _, e := range p.retentionAudit() {
			if e.Action == "delete" && e.Outcome == "ok" {
				deleted = append(deleted, e.WorkspaceID)
			}
		}
		sort.Strings(deleted)
		if !slices.Equal(deleted, want) {
			return fmt.Errorf("retention deleted %v; the dry run listed %v", deleted, want)
		}
		return nil
	})

	// Resumed at the engine after the tick claimed it: the tick's re-check
	// asks the engine about the box (held by the gate), the box is started
	// meanwhile, and the engine's answer says running. No reconcile pass
	// comes for an hour, so only the re-check can know.
	p.must(200, "PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": false}, nil)
	resumed := p.pauseAndWait(ws["resumed"].ID)
	gate.arm(`^(/v[0-9.]+)?/containers/` + resumed.BoxID + `/json$`)
	p.must(200, "PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": 1}, nil)
	select {
	case held := <-gate.reached:
		t.Logf("holding the re-check %s; starting the box at the engine", held)
	case <-time.After(60 * time.Second):
		t.Fatal("the tick never asked the engine about the scheduled box")
	}
	if _, err := dockerCLI(t).ContainerStart(context.Background(), resumed.BoxID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	testsupport.Poll(t, 60*time.Second, func() error {
		for _, e := range p.retentionAudit() {
			if e.WorkspaceID == resumed.ID && e.Action == "retention_skip" {
				if !strings.Contains(e.Outcome, "resumed") {
					return fmt.Errorf("skipped for another reason: %s", e.Outcome)
				}
				return nil
			}
		}
		return fmt.Errorf("no skip of the resumed workspace in the audit trail yet")
	})
	if w := p.waitState(resumed.ID, "running", 10*time.Second); w.DeleteAfter != nil {
		t.Errorf("resumed workspace still scheduled: %v", w.DeleteAfter)
	}
	p.waitState(ws["kept"].ID, "paused", 10*time.Second)
	p.waitState(ws["running"].ID, "running", 10*time.Second)
}

// TestRetentionNeverInDesktop: a desktop companion with a policy set and
// a workspace paused past it, ticking every 50 ms, deletes nothing and
// schedules nothing; its retention answer says scheduled deletion is off.
// Bad policies are refused with the field named.
func TestRetentionNeverInDesktop(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", image, "--docker-scope", scope, "--retention-interval", "50ms"}})
	w := p.pauseAndWait(p.createRunning("desk")["desk"].ID)

	for _, bad := range []struct {
		method, path string
		body         any
		status       int
		mention      string
	}{
		{"PUT", "/v1/accounts/local-docker/retention", map[string]any{"paused_for_seconds": 1}, 400, "enabled"},
		{"PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true}, 400, "paused_for_seconds"},
		{"PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": -5}, 400, "paused_for_seconds"},
		{"PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": 5, "warn_before_seconds": -1}, 400, "warn_before_seconds"},
		{"PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": 5, "storage_price_per_gib_month": -1}, 400, "storage_price_per_gib_month"},
		{"PUT", "/v1/accounts/local-docker/retention", `{"enabled": true,`, 400, ""},
		{"PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_days": 5}, 400, "paused_for_days"},
		{"PUT", "/v1/accounts/acc_nope/retention", map[string]any{"enabled": false}, 404, "acc_nope"},
		{"POST", "/v1/accounts/local-docker/retention/preview", map[string]any{}, 400, "paused_for_seconds"},
	} {
		code, raw := p.call(bad.method, bad.path, bad.body, nil)
		if code != bad.status || !strings.Contains(string(raw), bad.mention) {
			t.Errorf("%s %s %v: %d %s; want %d naming %q", bad.method, bad.path, bad.body, code, raw, bad.status, bad.mention)
		}
	}
	var ans retentionAnswer
	p.must(200, "GET", "/v1/accounts/local-docker/retention", nil, &ans)
	if ans.Retention.Enabled {
		t.Fatal("a refused policy was stored")
	}

	p.must(200, "PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": 1}, &ans)
	if ans.Scheduler.ScheduledDeletion {
		t.Fatal("desktop says it deletes on a timer")
	}
	// Due: the dry run of the stored policy lists it for now.
	testsupport.Poll(t, 30*time.Second, func() error {
		var pv retentionPreview
		p.must(200, "POST", "/v1/accounts/local-docker/retention/preview", map[string]any{"paused_for_seconds": 1}, &pv)
		if len(pv.Workspaces) != 1 || pv.Workspaces[0].ID != w.ID || w.PausedAt == nil || time.Since(*w.PausedAt) <= time.Second {
			return fmt.Errorf("not due yet: %+v", pv)
		}
		return nil
	})
	p.must(200, "GET", "/v1/accounts/local-docker/retention", nil, &ans)
	from := ans.Scheduler.Ticks
	testsupport.Poll(t, 30*time.Second, func() error {
		p.must(200, "GET", "/v1/accounts/local-docker/retention", nil, &ans)
		if ans.Scheduler.Ticks < from+10 {
			return fmt.Errorf("%d ticks since the workspace became due", ans.Scheduler.Ticks-from)
		}
		return nil
	})
	if got := p.waitState(w.ID, "paused", 5*time.Second); got.DeleteAfter != nil {
		t.Errorf("desktop scheduled the workspace: delete_after %v", got.DeleteAfter)
	}
	if a := p.retentionAudit(); len(a) != 0 {
		t.Errorf("desktop retention decisions %+v; want none", a)
	}
	var pg auditPage
	p.must(200, "GET", "/v1/audit?limit=1", nil, &pg)
	if len(pg.Entries) != 1 || pg.Entries[0].Action != "retention_policy" || pg.Entries[0].Actor != "desktop token" {
		t.Errorf("newest audit entry %+v; want the policy change by the desktop token", pg.Entries)
	}
}

// TestRetentionIntervalFlag: a retention interval that is not positive
// stops companion at start with a message naming the flag.
func TestRetentionIntervalFlag(t *testing.T) {
	for _, mode := range []string{"desktop", "serve"} {
		cmd := exec.Command(companionBin, mode, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--retention-interval", "0s")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--retention-interval") {
			t.Errorf("%s --retention-interval 0s: %v\n%s", mode, err, out)
		}
	}
}
