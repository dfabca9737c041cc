package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/moby/moby/client"
)

// engineGate is an HTTP proxy in front of the Docker Engine socket that
// holds the requests matching a pattern, either before they reach the
// engine or after the engine answered, and reports when one is held, so
// a test can crash companion at exactly that point of a create.
type engineGate struct {
	path    string
	match   *regexp.Regexp
	before  bool // hold before forwarding; else after the engine answered
	reached chan string
}

func newEngineGate(t *testing.T, pattern string, before bool) *engineGate {
	t.Helper()
	g := &engineGate{path: filepath.Join(t.TempDir(), "docker.sock"), match: regexp.MustCompile(pattern), before: before, reached: make(chan string, 8)}
	ln, err := net.Listen("unix", g.path)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: "docker"})
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", "/var/run/docker.sock")
		}},
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if !g.before && g.match.MatchString(resp.Request.URL.Path) {
				g.hold(resp.Request)
				return resp.Request.Context().Err()
			}
			return nil
		},
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.before && g.match.MatchString(r.URL.Path) {
			g.hold(r)
			return
		}
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return g
}

// hold reports r and keeps it until its client goes away (companion dies).
func (g *engineGate) hold(r *http.Request) {
	select {
	case g.reached <- r.Method + " " + r.URL.Path:
	default:
	}
	<-r.Context().Done()
}

// TestKillNineDuringCreate crashes companion (SIGKILL) at each point of a
// Docker create: before the container is made, after it is made but before
// it is started (what a kill 10-20 ms after the request hits), and after
// the start reached the engine but before its answer. After a restart the
// journaled create must finish: the workspace ends running, or in error
// with a reason, never silently paused with a container nobody started.
func TestKillNineDuringCreate(t *testing.T) {
	image := boxImage(t)
	const (
		create = `^(/v[0-9.]+)?/containers/create$`
		start_ = `^(/v[0-9.]+)?/containers/[^/]+/start$`
	)
	for _, pt := range []struct {
		name    string
		pattern string
		before  bool
	}{
		{"before the container is made", create, true},
		{"between create and start", start_, true},
		{"after start, before its answer", start_, false},
	} {
		t.Run(pt.name, func(t *testing.T) {
			scope, data := dockerScope(t), t.TempDir()
			args := []string{"--docker-image", image, "--docker-scope", scope}
			gate := newEngineGate(t, pt.pattern, pt.before)
			p := start(t, options{dataDir: data, args: args, env: []string{"DOCKER_HOST=unix://" + gate.path}})
			var created struct{ Workspace workspace }
			p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "crashed"}, &created)
			id := created.Workspace.ID
			select {
			case held := <-gate.reached:
				t.Logf("holding %s; killing companion", held)
			case <-time.After(60 * time.Second):
				t.Fatal("the create never reached the point to crash at")
			}
			p.kill()

			p = start(t, options{dataDir: data, args: args})
			w := p.waitSettled(id, 90*time.Second)
			switch {
			case w.State == "running":
				if !containerRunning(t, w.BoxID) {
					t.Fatalf("workspace says running but its container %q is not: %+v", w.BoxID, w)
				}
			case w.State == "error" && w.Error != "":
				t.Logf("create failed visibly after the crash: %s", w.Error)
			default:
				t.Fatalf("after the crash and a restart the workspace is %s (error %q), want running or error with a reason", w.State, w.Error)
			}
			// Nothing is left half-done in the journal: a third start
			// leaves the workspace as it was.
			p.stop()
			p = start(t, options{dataDir: data, args: args})
			var again struct{ Workspace workspace }
			p.must(200, "GET", "/v1/workspaces/"+id, nil, &again)
			if again.Workspace.State != w.State || again.Workspace.BoxID != w.BoxID {
				t.Fatalf("after another restart: %+v, before: %+v", again.Workspace, w)
			}
		})
	}
}

// waitSettled polls a workspace until it leaves the creating state.
func (p *proc) waitSettled(id string, timeout time.Duration) workspace {
	p.t.Helper()
	var got struct{ Workspace workspace }
	testsupport.Poll(p.t, timeout, func() error {
		status, raw := p.call("GET", "/v1/workspaces/"+id, nil, &got)
		if status == 200 && got.Workspace.State != "creating" {
			return nil
		}
		return fmt.Errorf("workspace %s still creating: %d %s", id, status, raw)
	})
	return got.Workspace
}

// containerRunning asks the Docker Engine directly.
func containerRunning(t *testing.T, id string) bool {
	t.Helper()
	if id == "" {
		return false
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	res, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "no such container") {
			return false
		}
		t.Fatalf("inspect %s: %v", id, err)
	}
	return res.Container.State != nil && res.Container.State.Running
}
