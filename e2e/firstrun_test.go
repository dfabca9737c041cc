package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCreateRefusesBadInputUpFront: unknown options and names with control
// or format characters, or too long, are refused with 400 naming the
// field, and nothing is recorded.
func TestCreateRefusesBadInputUpFront(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", boxImage(t), "--docker-scope", dockerScope(t)}})
	cases := []struct {
		what  string
		body  string
		field string
	}{
		{"unknown docker option", `{"account_id":"local-docker","name":"a","options":{"imag":"x"}}`, "options.imag"},
		{"newline in name", `{"account_id":"local-docker","name":"a\nb"}`, "name"},
		{"NUL in name", `{"account_id":"local-docker","name":"a\u0000b"}`, "name"},
		{"bidi override in name", `{"account_id":"local-docker","name":"a\u202eb"}`, "name"},
		{"name too long", `{"account_id":"local-docker","name":"` + strings.Repeat("x", 101) + `"}`, "name"},
		{"control character in an option", `{"account_id":"local-docker","name":"a","options":{"image":"x\ty"}}`, "options.image"},
	}
	for _, c := range cases {
		var e apiError
		code, raw := p.call("POST", "/v1/workspaces", c.body, &e)
		if code != 400 || e.Error.Code != "invalid" || !strings.HasPrefix(e.Error.Message, c.field+" ") && !strings.HasPrefix(e.Error.Message, c.field+":") {
			t.Errorf("%s: %d %s, want 400 invalid naming %s", c.what, code, raw, c.field)
		}
	}
	var list struct {
		Workspaces []workspace `json:"workspaces"`
	}
	p.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 0 {
		t.Fatalf("refused creates left records: %+v", list.Workspaces)
	}
	// A declared option still goes through.
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "ok", "options": map[string]string{"image": boxImage(t)}}, nil)
}

// TestUnpullableDefaultImage: the binary defaults to the published
// agent-server image; a default image the engine lacks and cannot pull
// (here one on a registry address that refuses connections, so the test
// behaves the same with or without internet) makes docker unavailable with
// the reason and the fix, and create answers 503 at once with the same
// words instead of 202.
func TestUnpullableDefaultImage(t *testing.T) {
	help, _ := exec.Command(companionBin, "desktop", "--help").CombinedOutput()
	if !strings.Contains(string(help), "(default ghcr.io/all-hands-ai/agent-server:latest)") {
		t.Fatalf("the default image is not the published agent-server:\n%s", help)
	}
	const image = "127.0.0.1:1/companion-missing:never"
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", image, "--docker-scope", dockerScope(t), "--log-format", "text"}})
	var provs struct {
		Providers []struct {
			Name      string `json:"name"`
			Available bool   `json:"available"`
			Reason    string `json:"reason"`
			Options   []struct {
				Name string `json:"name"`
			} `json:"options"`
		} `json:"providers"`
	}
	p.must(200, "GET", "/v1/providers", nil, &provs)
	var reason string
	for _, pr := range provs.Providers {
		if pr.Name != "docker" {
			continue
		}
		if pr.Available || len(pr.Options) != 1 || pr.Options[0].Name != "image" {
			t.Fatalf("docker with an image it cannot pull: %+v", pr)
		}
		reason = pr.Reason
	}
	for _, want := range []string{image, "could not be pulled", "--docker-image"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not say %q", reason, want)
		}
	}
	var e apiError
	p.must(503, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "x"}, &e)
	if !strings.Contains(e.Error.Message, "could not be pulled") {
		t.Fatalf("create: %+v", e)
	}
	var list struct {
		Workspaces []workspace `json:"workspaces"`
	}
	p.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 0 {
		t.Fatalf("a create that cannot work left a record: %+v", list.Workspaces)
	}
	// A create naming an image the engine has is not held back by the
	// default it cannot pull.
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "own image", "options": map[string]string{"image": boxImage(t)}}, &created)
	p.waitState(created.Workspace.ID, "running", 60*time.Second)
	p.stop()
	logs := p.stderr.String()
	if !strings.Contains(logs, "pulling it") || !strings.Contains(logs, "image pull failed") {
		t.Errorf("the pull attempt is not in the log:\n%s", logs)
	}
	if strings.Contains(logs, "provider=docker provider=docker") {
		t.Errorf("doubled log attribute:\n%s", logs)
	}
}

// switchProxy relays a unix socket to the Docker Engine until silence is
// switched on; from then it accepts connections and never answers, like a
// wedged engine. Switching drops the relayed connections, so the client
// has to dial again.
type switchProxy struct {
	path   string
	silent atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func newSwitchProxy(t *testing.T) *switchProxy {
	t.Helper()
	sp := &switchProxy{path: filepath.Join(t.TempDir(), "docker.sock")}
	ln, err := net.Listen("unix", sp.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); sp.dropAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			sp.track(c)
			if sp.silent.Load() {
				go io.Copy(io.Discard, c)
				continue
			}
			up, err := net.Dial("unix", "/var/run/docker.sock")
			if err != nil {
				c.Close()
				continue
			}
			sp.track(up)
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return sp
}

func (sp *switchProxy) track(c net.Conn) {
	sp.mu.Lock()
	sp.conns = append(sp.conns, c)
	sp.mu.Unlock()
}

func (sp *switchProxy) dropAll() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, c := range sp.conns {
		c.Close()
	}
	sp.conns = nil
}

func (sp *switchProxy) goSilent() {
	sp.silent.Store(true)
	sp.dropAll()
}

// TestSilentEngineAnswersUnavailable: when the Docker Engine accepts
// connections and never answers, pause and create answer 503 naming the
// engine, within the provider's own deadlines (seconds). The HTTP client's
// minute-long timeout only keeps a regression from hanging the test.
func TestSilentEngineAnswersUnavailable(t *testing.T) {
	proxy := newSwitchProxy(t)
	p := start(t, options{
		dataDir: t.TempDir(),
		args:    []string{"--docker-image", boxImage(t), "--docker-scope", dockerScope(t), "--reconcile-interval", "1h"},
		env:     []string{"DOCKER_HOST=unix://" + proxy.path},
	})
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "wedged"}, &created)
	id := created.Workspace.ID
	p.waitState(id, "running", 60*time.Second)

	proxy.goSilent()
	client := &http.Client{Timeout: time.Minute}
	do := func(method, path, body string) (int, apiError) {
		t.Helper()
		req, _ := http.NewRequest(method, p.ready.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.ready.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s against a silent engine: %v", method, path, err)
		}
		defer resp.Body.Close()
		var e apiError
		raw, _ := io.ReadAll(resp.Body)
		json.Unmarshal(raw, &e)
		return resp.StatusCode, e
	}
	code, e := do("POST", "/v1/workspaces/"+id+"/pause", "")
	if code != 503 || !strings.Contains(e.Error.Message, "did not answer in time") {
		t.Errorf("pause: %d %+v, want 503 did not answer in time", code, e)
	}
	code, e = do("POST", "/v1/workspaces", `{"account_id":"local-docker","name":"while-wedged"}`)
	if code != 503 || !strings.Contains(e.Error.Message, "did not answer in time") {
		t.Errorf("create: %d %+v, want 503 did not answer in time", code, e)
	}
}

// TestFirstRunSaysWhatItDoes: `providers list` on a fresh data dir reads
// the modules' manifests only: it lists them, compiles nothing (the
// compile cache stays empty) and says nothing about compiling. --help
// writes flags with two dashes, as README does. (The compile a first use
// makes, and what it says, is TestModulesCompiledOnlyWhenUsed.)
func TestFirstRunSaysWhatItDoes(t *testing.T) {
	data := t.TempDir()
	for range 2 {
		var stderr bytes.Buffer
		cmd := exec.Command(companionBin, "providers", "list", "--data-dir", data)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("providers list: %v\n%s%s", err, out, stderr.String())
		}
		for _, m := range []string{"daytona", "e2b", "digitalocean"} {
			if !strings.Contains(string(out), m) {
				t.Errorf("providers list lacks %s:\n%s", m, out)
			}
		}
		if strings.Contains(stderr.String(), "compil") {
			t.Errorf("providers list compiles:\n%s", stderr.String())
		}
		if n := compiledModules(t, data); n != 0 {
			t.Errorf("providers list left %d compiled modules in the cache", n)
		}
	}

	out, _ := exec.Command(companionBin, "desktop", "--help").CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") {
			t.Errorf("--help lists a flag with one dash: %q", line)
		}
	}
	if !strings.Contains(string(out), "  --docker-image image") {
		t.Errorf("--help:\n%s", out)
	}
}
