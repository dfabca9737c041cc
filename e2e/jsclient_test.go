package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
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
)

// TestJSClient runs the JavaScript client's tests (ui-bridge/client/test,
// `node --test`) against a real companion with Docker workspaces. Node
// learns companion's URL and token from the environment and asks a small
// control server here to restart companion on the same data dir and port
// (its token changes; the control server hands out the new one). Node 20+
// is a test prerequisite: missing, the test fails rather than skips.
func TestJSClient(t *testing.T) {
	node := nodeBinary(t)
	image, scope := boxImage(t), dockerScope(t)
	opts := options{dataDir: t.TempDir(), args: []string{"--docker-image", image, "--docker-scope", scope}}

	p := start(t, opts)
	u, err := url.Parse(p.ready.URL)
	if err != nil {
		t.Fatal(err)
	}
	// Later starts listen on the same port, so that the client comes back
	// to the address it knows, as it would to a desktop app's child.
	opts.args = append(opts.args, "--listen", u.Host)

	// The control server only passes requests to the test goroutine,
	// which owns the companion process (start and stop fail the test,
	// which only the test goroutine may do).
	// Node's fetch and WebSocket ignore proxy settings: they are given a
	// checking front on companion's address, which outlives the restarts.
	front := contractFront(t, p.ready.URL)
	var mu sync.Mutex
	current := p.ready
	restarts := make(chan chan ready)
	control := http.NewServeMux()
	control.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		json.NewEncoder(w).Encode(viaFront(current, front))
	})
	control.HandleFunc("POST /restart", func(w http.ResponseWriter, r *http.Request) {
		reply := make(chan ready, 1)
		select {
		case restarts <- reply:
		case <-r.Context().Done():
			return
		}
		select {
		case rd := <-reply:
			json.NewEncoder(w).Encode(viaFront(rd, front))
		case <-r.Context().Done():
		}
	})
	ctl := httptest.NewServer(control)
	defer ctl.Close()

	files, err := filepath.Glob("../ui-bridge/client/test/*.test.mjs")
	if err != nil || len(files) == 0 {
		t.Fatalf("no client tests under ui-bridge/client/test: %v", err)
	}
	// One file at a time: the restart test takes companion away from the
	// others.
	args := append([]string{"--experimental-websocket", "--test", "--test-concurrency=1", "--test-reporter=spec"}, files...)
	cmd := exec.Command(node, args...)
	cmd.Env = append(os.Environ(),
		"COMPANION_URL="+front,
		"COMPANION_TOKEN="+p.ready.Token,
		"COMPANION_CONTROL="+ctl.URL,
		"COMPANION_ACCOUNT=local-docker",
	)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if t.Failed() {
			cmd.Process.Kill()
		}
	}()
	for {
		select {
		case reply := <-restarts:
			p.stop()
			p = start(t, opts)
			mu.Lock()
			current = p.ready
			mu.Unlock()
			reply <- p.ready
		case err := <-done:
			t.Logf("node --test:\n%s", out.String())
			if err != nil {
				t.Fatalf("the JavaScript client's tests failed: %v", err)
			}
			return
		}
	}
}

// contractFront starts the API contract's checking front on companion's
// address (a Go test's own exchanges are checked through
// http.DefaultTransport; Node's cannot be pointed at a proxy) and returns
// the URL to give the client instead of companion's. Its exchanges are
// checked as exchanges with companion, so breaches fail the test that
// registered it.
func contractFront(t *testing.T, url string) string {
	t.Helper()
	f, err := contract.NewFront(url)
	if err != nil {
		t.Fatalf("the API contract's front: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f.URL
}

// viaFront is rd as the client behind front sees it.
func viaFront(rd ready, front string) ready {
	if strings.HasPrefix(rd.PageURL, rd.URL) {
		rd.PageURL = front + strings.TrimPrefix(rd.PageURL, rd.URL)
	}
	rd.URL = front
	return rd
}

// nodeBinary finds Node 20 or later. A missing or older Node fails the
// test: `make test` promises every test runs (scripts/setup.sh --test
// installs nodejs).
func nodeBinary(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node (Node.js 20 or later) is needed for the JavaScript client's tests: install nodejs (scripts/setup.sh --test does): %v", err)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", node, err)
	}
	m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s --version printed %q", node, out)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < 20 {
		t.Fatalf("node %s is too old: the client's tests need Node.js 20 or later", out)
	}
	return node
}

// TestJSClientSignedOut runs the client's serve-mode tests
// (ui-bridge/client/test/serve) against companion serve --auth local,
// with a personal API token made by the CLI as the client's token: the
// stream opens with it (as a subprotocol entry, as in a browser), and when
// it is revoked the stream ends with 4012 and the client stops.
func TestJSClientSignedOut(t *testing.T) {
	node := nodeBinary(t)
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	token := strings.TrimSpace(cli(t, "", "tokens", "create", "--user", "alice", "--data-dir", data))
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--docker-scope", "unused"}})
	files, err := filepath.Glob("../ui-bridge/client/test/serve/*.test.mjs")
	if err != nil || len(files) == 0 {
		t.Fatalf("no serve-mode client tests under ui-bridge/client/test/serve: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--experimental-websocket", "--test", "--test-reporter=spec"}, files...)...)
	cmd.Env = append(os.Environ(), "COMPANION_URL="+contractFront(t, p.ready.URL), "COMPANION_TOKEN="+token, "COMPANION_ACCOUNT=local-docker")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("the JavaScript client's serve-mode tests failed: %v", err)
	}
}

// TestJSClientGuide runs the guide for Electron (docs/desktop.md) as written
// (ui-bridge/client/test/guide): the guide spawns companion desktop
// itself, here through a wrapper that adds this test's Docker image and
// scope, with its default data dir under a temporary XDG_CONFIG_HOME.
// The wrapper also puts the API contract's front between the guide and
// companion: companion listens on a port chosen here, and the ready line's
// url names the front instead (companion's stdin, stderr and exit status
// pass through as they are).
func TestJSClientGuide(t *testing.T) {
	node := nodeBinary(t)
	dir := t.TempDir()
	addr := "127.0.0.1:" + freePort(t)
	upstream := "http://" + addr
	contract.Register(upstream)
	t.Cleanup(func() {
		for _, f := range contract.Forget(upstream) {
			t.Error(f)
		}
	})
	front := contractFront(t, upstream)
	wrapper := filepath.Join(dir, "companion")
	script := fmt.Sprintf("#!/bin/bash\nset -o pipefail\n%q \"$@\" --docker-image %q --docker-scope %q --listen %q | sed -u 's#\"url\":\"%s#\"url\":\"%s#'\n",
		companionBin, boxImage(t), dockerScope(t), addr, upstream, front)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--experimental-websocket", "--test", "--test-reporter=spec", "../ui-bridge/client/test/guide/guide.test.mjs")
	cmd.Env = append(os.Environ(), "COMPANION_BIN="+wrapper, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("the guide for Electron (docs/desktop.md) failed: %v", err)
	}
}
