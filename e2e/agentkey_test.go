package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/secrets"
)

// TestAgentKeyAndEndpoint, through the binary and real Docker: the box runs
// with the agent-server key companion generated, GET /v1/workspaces/{id}/agent
// reaches the agent-server through the adapter's endpoint with that key, the
// key is in the keyring under the workspace and in no database file, and a
// delete removes it from the keyring.
func TestAgentKeyAndEndpoint(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	dataDir := t.TempDir()
	p := start(t, options{dataDir: dataDir, args: []string{"--docker-image", image, "--docker-scope", scope}})

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "keyed"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", 90*time.Second).BoxID

	var agent struct {
		Agent struct {
			IdleSeconds *float64 `json:"idle_seconds"`
			Version     string   `json:"version"`
		} `json:"agent"`
	}
	testsupport.Poll(t, 30*time.Second, func() error { // the agent-server may still be starting
		if code, raw := p.call("GET", "/v1/workspaces/"+id+"/agent", nil, &agent); code != 200 {
			return fmt.Errorf("GET agent: %d %s", code, raw)
		}
		return nil
	})
	if agent.Agent.IdleSeconds == nil || agent.Agent.Version == "" {
		t.Fatalf("agent info %+v", agent)
	}
	p.must(404, "GET", "/v1/workspaces/ws_nope/agent", nil, nil)

	key := containerKey(t, box)
	if len(key) != 64 {
		t.Fatalf("box key %q is not companion's 256-bit hex key", key)
	}

	// A paused box has no endpoint: a clear conflict, not a hang.
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", 60*time.Second)
	var conflict struct {
		Error struct{ Code, Message string }
	}
	p.must(409, "GET", "/v1/workspaces/"+id+"/agent", nil, &conflict)
	if !strings.Contains(conflict.Error.Message, "paused") {
		t.Errorf("paused agent read: %+v", conflict)
	}
	p.stop()

	files, _ := filepath.Glob(filepath.Join(dataDir, "companion.db*"))
	if len(files) == 0 {
		t.Fatal("no database files to check")
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte(key)) {
			t.Fatalf("the agent-server key is in %s", f)
		}
	}
	if strings.Contains(p.stderr.String(), key) {
		t.Fatal("the agent-server key is in companion's logs")
	}
	keys := keyringOf(t, dataDir)
	got, err := keys.Get(context.Background(), core.AgentKeyKey(id))
	if err != nil || got != key {
		t.Fatalf("keyring holds %q (%v), want the box's key", got, err)
	}

	// Delete the workspace: the key leaves the keyring with it.
	p = start(t, options{dataDir: dataDir, args: []string{"--docker-image", image, "--docker-scope", scope}})
	p.deleteConfirmed(id)
	p.waitRemoved(id, 60*time.Second)
	p.stop()
	if _, err := keys.Get(context.Background(), core.AgentKeyKey(id)); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("after delete the keyring still answers %v for the key", err)
	}
}

// TestAgentKeyWithoutKeyring: a desktop with no Secret Service still creates
// Docker boxes. Companion cannot keep a key it would make, so it says so and
// lets the adapter make the box's key; the agent-server is then reached with
// the key read back from the box, and the delete pipeline's export (which
// must verify before the box goes) gets in with it too. The key is in no
// database file and no log line.
func TestAgentKeyWithoutKeyring(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	dataDir := t.TempDir()
	p := start(t, options{dataDir: dataDir, env: noKeyring, args: []string{"--docker-image", image, "--docker-scope", scope}})

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "unkept"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", 90*time.Second).BoxID
	if !strings.Contains(p.stderr.String(), "the provider makes this box's agent-server key") {
		t.Fatalf("no warning that the provider makes the key:\n%s", p.stderr.String())
	}
	key := containerKey(t, box)
	if key == "" {
		t.Fatal("the box runs without an agent-server key")
	}
	testsupport.Poll(t, 30*time.Second, func() error { // the agent-server may still be starting
		if code, raw := p.call("GET", "/v1/workspaces/"+id+"/agent", nil, nil); code != 200 {
			return fmt.Errorf("GET agent: %d %s", code, raw)
		}
		return nil
	})

	p.deleteConfirmed(id)
	p.waitRemoved(id, 2*time.Minute)
	if got := p.verifiedExports(id); len(got) != 1 {
		t.Fatalf("verified exports of the deleted workspace: %+v", got)
	}
	p.stop()
	if strings.Contains(p.stderr.String(), key) {
		t.Fatal("the agent-server key is in companion's logs")
	}
	files, _ := filepath.Glob(filepath.Join(dataDir, "companion.db*"))
	for _, f := range files {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte(key)) {
			t.Fatalf("the agent-server key is in %s", f)
		}
	}
}

// containerKey reads the session key from the box's environment at the
// engine, bypassing companion.
func containerKey(t *testing.T, id string) string {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ins, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ins.Container.Config.Env {
		if v, ok := strings.CutPrefix(e, "OH_SESSION_API_KEYS_0="); ok {
			return v
		}
	}
	t.Fatalf("box %s has no OH_SESSION_API_KEYS_0", id)
	return ""
}

// keyringOf opens the keyring namespace of a (stopped) companion's data dir.
func keyringOf(t *testing.T, dataDir string) *secrets.Keyring {
	t.Helper()
	store, err := db.Open(context.Background(), filepath.Join(dataDir, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	inst, err := store.InstanceID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	k := &secrets.Keyring{Namespace: inst}
	testsupport.NeedKeyring(t, k)
	return k
}

// TestAgentEndpointDaytona, through the binary and the Daytona emulator:
// the first-party module reports the preview URL and token, companion
// reaches the box's agent-server through the emulator's preview proxy, the
// key companion made is in the sandbox's env and the keyring only, and the
// proxied read counts as Daytona activity.
func TestAgentEndpointDaytona(t *testing.T) {
	dt := daytona.New(daytona.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
	srv := httptest.NewServer(dt.Handler())
	t.Cleanup(func() { dt.Close(); srv.Close() })
	u, _ := url.Parse(srv.URL)
	dt.SetProxy("http", "localhost:"+u.Port())
	dataDir := t.TempDir()
	p := start(t, options{dataDir: dataDir})

	var acct struct{ Account struct{ ID string } }
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "daytona", "label": "reach", "config": map[string]string{"api_url": srv.URL + "/api", "proxy_hosts": "*.localhost"},
		"credentials": map[string]string{"token": cloudToken},
	}, &acct)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct.Account.ID, "name": "reach"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", 60*time.Second).BoxID

	before, _ := dt.Sandbox(box)
	var agent struct {
		Agent struct {
			IdleSeconds *float64 `json:"idle_seconds"`
			Version     string   `json:"version"`
		} `json:"agent"`
	}
	p.must(200, "GET", "/v1/workspaces/"+id+"/agent", nil, &agent)
	if agent.Agent.IdleSeconds == nil || agent.Agent.Version != "emulated" {
		t.Fatalf("agent info %+v", agent)
	}
	after, _ := dt.Sandbox(box)
	if !after.LastActivityAt.After(before.LastActivityAt) {
		t.Errorf("the proxied read did not reset Daytona's auto-stop: %v → %v", before.LastActivityAt, after.LastActivityAt)
	}
	key := after.Env["OH_SESSION_API_KEYS_0"]
	if len(key) != 64 {
		t.Fatalf("sandbox env key %q, want companion's 256-bit hex key", key)
	}
	p.stop()
	files, _ := filepath.Glob(filepath.Join(dataDir, "companion.db*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte(key)) {
			t.Fatalf("the agent-server key is in %s", f)
		}
	}
	if got, err := keyringOf(t, dataDir).Get(context.Background(), core.AgentKeyKey(id)); err != nil || got != key {
		t.Fatalf("keyring holds %q (%v), want the sandbox's key", got, err)
	}
}
