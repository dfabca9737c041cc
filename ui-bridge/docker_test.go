package uibridge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/dockertest"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// dockerEnv is a test server with the real docker provider, scoped to this
// test's containers, and the local account.
func dockerEnv(t *testing.T, host string) *testEnv {
	t.Helper()
	ctx := context.Background()
	img := "companion-e2e-box:unused"
	if host == "" {
		// Boxes look idle for an hour from the start, so the delete's
		// "used since the preview" check cannot mistake a slow idle-clock
		// reading on a loaded machine for use.
		img = dockertest.BoxImageEnv(t, map[string]string{"EMULATOR_IDLE_AT_START_SECONDS": "3600"})
	}
	scope := dockertest.Scope(t)
	p, err := docker.New(docker.Config{Image: img, Scope: scope, Host: host, Logger: slogTo(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	reg := &core.Registry{}
	reg.Register("docker", p)
	e := newEnvWith(t, openStore(t), reg, nil)
	e.t = t
	if _, err := e.svc.EnsureAccount(ctx, core.Account{ID: "acc_local", Provider: "docker", Label: "Local Docker"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// await reads stream messages until one about id satisfies done, checking
// that revisions only go up. It returns the upserts seen on the way.
func await(t *testing.T, c *websocket.Conn, id string, last *int64, done func(Message) bool) []Message {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var seen []Message
	for {
		m, err := tryReadMsg(c, time.Until(deadline))
		if err != nil {
			t.Fatalf("waiting for workspace %s (saw %v): %v", id, states(seen), err)
		}
		if m.Rev <= *last {
			t.Fatalf("rev %d after rev %d", m.Rev, *last)
		}
		*last = m.Rev
		if m.ID != id && (m.Workspace == nil || m.Workspace.ID != id) {
			continue
		}
		seen = append(seen, m)
		if done(m) {
			return seen
		}
	}
}

func states(ms []Message) []string {
	var out []string
	for _, m := range ms {
		if m.Workspace != nil {
			out = append(out, m.Workspace.State)
		} else {
			out = append(out, m.Type)
		}
	}
	return out
}

func stateIs(s string) func(Message) bool {
	return func(m Message) bool { return m.Workspace != nil && m.Workspace.State == s }
}

func TestDockerWorkspaceLifecycle(t *testing.T) {
	e := dockerEnv(t, "")
	c := e.mustDial("")
	snap := readMsg(t, c)
	last := snap.Rev

	resp, body := e.do("GET", "/v1/providers", "")
	var provs struct{ Providers []Provider }
	if err := json.Unmarshal(body, &provs); err != nil || len(provs.Providers) != 1 {
		t.Fatalf("providers: %d %s", resp.StatusCode, body)
	}
	if p := provs.Providers[0]; !p.Available || p.Name != "docker" || p.Kind == "" || !p.Capabilities.Suspend || !p.Capabilities.Delete {
		t.Fatalf("docker provider: %+v", p)
	}

	// A lifecycle setting the provider cannot enforce is refused.
	resp, body = e.do("POST", "/v1/workspaces", `{"account_id":"acc_local","name":"bridge test","lifecycle":{"idle_pause_after_seconds":600,"paused_ttl_seconds":0}}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "idle_pause_after") {
		t.Fatalf("create with an idle pause docker cannot enforce: %d %s", resp.StatusCode, body)
	}

	// Create.
	resp, body = e.do("POST", "/v1/workspaces", `{"account_id":"acc_local","name":"bridge test","lifecycle":{"idle_pause_after_seconds":0,"paused_ttl_seconds":0}}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	ws := decode[map[string]Workspace](t, body)["workspace"]
	if ws.State != "creating" || ws.ID == "" || resp.Header.Get("Location") != "/v1/workspaces/"+ws.ID {
		t.Fatalf("create answered %+v (Location %q)", ws, resp.Header.Get("Location"))
	}
	seen := await(t, c, ws.ID, &last, stateIs("running"))
	if seen[0].Workspace.State != "creating" {
		t.Fatalf("first upsert of the new workspace is %s, want creating", seen[0].Workspace.State)
	}
	running := seen[len(seen)-1].Workspace
	if running.BoxID == "" || !strings.HasPrefix(running.BoxURL, "http://127.0.0.1:") {
		t.Fatalf("running workspace %+v", running)
	}
	if strings.Contains(mustJSON(seen), "OH_SESSION_API_KEYS") {
		t.Fatal("the stream carries the box key")
	}

	// Illegal transition: resume a running workspace.
	resp, body = e.act("/v1/workspaces/"+ws.ID+"/resume", "")
	if d := e.expectError(resp, body, http.StatusConflict, "conflict"); d.State != "running" || !strings.Contains(d.Message, "cannot resume") {
		t.Fatalf("conflict %+v, want an illegal transition from running", d)
	}

	// Pause.
	resp, body = e.act("/v1/workspaces/"+ws.ID+"/pause", "")
	if resp.StatusCode != http.StatusAccepted || decode[map[string]Workspace](t, body)["workspace"].State != "pausing" {
		t.Fatalf("pause: %d %s", resp.StatusCode, body)
	}
	paused := await(t, c, ws.ID, &last, stateIs("paused"))
	if p := paused[len(paused)-1].Workspace; p.PausedAt == nil || p.SizeSource == nil {
		t.Fatalf("paused workspace without paused_at or size: %+v", p)
	}
	resp, body = e.act("/v1/workspaces/"+ws.ID+"/pause", "")
	if d := e.expectError(resp, body, http.StatusConflict, "conflict"); d.State != "paused" || !strings.Contains(d.Message, "cannot pause") {
		t.Fatalf("conflict %+v, want an illegal transition from paused", d)
	}

	// Resume.
	resp, body = e.act("/v1/workspaces/"+ws.ID+"/resume", "")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("resume: %d %s", resp.StatusCode, body)
	}
	resumed := await(t, c, ws.ID, &last, stateIs("running"))
	if r := resumed[len(resumed)-1].Workspace; r.PausedAt != nil || r.ID != ws.ID {
		t.Fatalf("resumed workspace %+v", r)
	}

	// Delete: preview, a wrong token, then the preview's token.
	resp, body = e.act("/v1/workspaces/"+ws.ID+"/delete-preview", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("preview: %d %s", resp.StatusCode, body)
	}
	preview := decode[DeletePreview](t, body)
	if preview.Token == "" || len(preview.Lost) == 0 || len(preview.Survives) == 0 || !preview.ExpiresAt.After(time.Now()) || preview.Workspace.ID != ws.ID {
		t.Fatalf("preview %+v", preview)
	}
	resp, body = e.do("POST", "/v1/workspaces/"+ws.ID+"/delete", `{"token":"not-the-token"}`)
	if d := e.expectError(resp, body, http.StatusBadRequest, "invalid"); !strings.Contains(d.Message, "preview") {
		t.Fatalf("bad token message %q", d.Message)
	}
	resp, body = e.do("POST", "/v1/workspaces/"+ws.ID+"/delete", `{"token":"`+preview.Token+`"}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	gone := await(t, c, ws.ID, &last, func(m Message) bool { return m.Type == "remove" })
	if m := gone[len(gone)-1]; m.ID != ws.ID {
		t.Fatalf("remove event %+v", m)
	}
	resp, body = e.do("GET", "/v1/workspaces/"+ws.ID, "")
	e.expectError(resp, body, http.StatusNotFound, "not_found")
	if strings.Contains(e.logs.String(), testToken) {
		t.Fatal("the token appears in the log")
	}
}

func TestDockerEngineUnreachable(t *testing.T) {
	// An engine address where nothing listens: Docker is not running.
	e := dockerEnv(t, "tcp://127.0.0.1:1")
	resp, body := e.do("GET", "/v1/providers", "")
	var provs struct{ Providers []Provider }
	json.Unmarshal(body, &provs)
	if len(provs.Providers) != 1 || provs.Providers[0].Available || provs.Providers[0].Reason == "" {
		t.Fatalf("providers with the engine down: %d %s", resp.StatusCode, body)
	}
	resp, body = e.do("POST", "/v1/workspaces", `{"account_id":"acc_local","name":"x"}`)
	e.expectError(resp, body, http.StatusServiceUnavailable, "unavailable")
	if n := len(e.svc.Workspaces("")); n != 0 {
		t.Fatalf("a refused create left %d workspaces", n)
	}
}

// act posts an action. core releases a workspace's lock only after it
// has published the action's outcome, so a request sent the moment the
// stream shows the outcome can meet "busy" (409); like a front end, retry
// that briefly.
func (e *testEnv) act(path, body string) (*http.Response, []byte) {
	e.t.Helper()
	var resp *http.Response
	var b []byte
	testsupport.PollErr(10*time.Second, func() error {
		if resp, b = e.do("POST", path, body); resp.StatusCode == http.StatusConflict && strings.Contains(string(b), "is busy") {
			return errBusy
		}
		return nil
	})
	return resp, b
}

var errBusy = errors.New("workspace busy")

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
