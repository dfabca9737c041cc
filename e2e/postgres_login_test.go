package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// TestServeOnPostgresLocalAuth: users and tokens made with the CLI against
// PostgreSQL (--database-file) sign in to `serve --auth local` on the same
// database; a session outlives a restart of serve (it lives in the
// database every replica shares, not in the process); the retention dry
// run lists a paused Docker workspace and the tick, claiming it in
// PostgreSQL, deletes it.
func TestServeOnPostgresLocalAuth(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	url := startPG(t)
	urlFile := filepath.Join(t.TempDir(), "database-url")
	if err := os.WriteFile(urlFile, []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1", "--database-file", urlFile)
	if _, err := os.Stat(filepath.Join(data, "companion.db")); err == nil {
		t.Fatal("users add --database-file wrote a SQLite database in the data dir")
	}
	if out, err := runCompanion(t, "users", "list", "--database", "mysql://x"); err == nil || !strings.Contains(out, "postgres://") {
		t.Errorf("users list --database mysql://x: %v %q; want a refusal naming postgres://", err, out)
	}
	if out := cli(t, "", "users", "list", "--database-file", urlFile); !strings.Contains(out, "alice") {
		t.Fatalf("users list on PostgreSQL: %q", out)
	}
	token := strings.TrimSpace(cli(t, "", "tokens", "create", "--user", "alice", "--database-file", urlFile))

	opts := options{mode: "serve", dataDir: data, args: []string{"--listen", "127.0.0.1:0", "--auth", "local",
		"--docker-image", image, "--docker-scope", scope, "--database-file", urlFile, "--retention-interval", "200ms"}}
	p := start(t, opts)
	anon := newWebClient(t, p.ready.URL)
	anon.must(401, "GET", "/v1/workspaces", nil, nil)
	if code, _, _ := anon.do("POST", "/v1/login", map[string]string{"name": "alice", "password": "wrong-password-9"}, nil); code < 400 {
		t.Errorf("wrong password: %d, want a refusal", code)
	}
	alice := newWebClient(t, p.ready.URL)
	alice.login("alice", "alice-password-1")
	script := newWebClient(t, p.ready.URL)
	script.bearer = token
	script.must(200, "GET", "/v1/workspaces", nil, nil)

	var created struct{ Workspace workspace }
	alice.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "to-retire"}, &created)
	id := created.Workspace.ID
	var w struct{ Workspace workspace }
	testsupport.Poll(t, 90*time.Second, func() error {
		alice.must(200, "GET", "/v1/workspaces/"+id, nil, &w)
		return pgStateIs(w.Workspace, "running")
	})
	boxID := w.Workspace.BoxID
	t.Cleanup(func() {
		if containerExists(t, boxID) {
			removeContainer(t, boxID)
		}
	})
	alice.must(202, "POST", "/v1/workspaces/"+id+"/pause", map[string]any{}, nil)
	testsupport.Poll(t, 60*time.Second, func() error {
		alice.must(200, "GET", "/v1/workspaces/"+id, nil, &w)
		return pgStateIs(w.Workspace, "paused")
	})

	// Restart serve: the cookie still signs alice in.
	p.term()
	p = start(t, opts)
	alice.base = p.ready.URL
	alice.must(200, "GET", "/v1/workspaces/"+id, nil, nil)

	var pv retentionPreview
	alice.must(200, "POST", "/v1/accounts/local-docker/retention/preview", map[string]any{"paused_for_seconds": 1}, &pv)
	if len(pv.Workspaces) != 1 || pv.Workspaces[0].ID != id || !pv.ScheduledDeletion {
		t.Fatalf("retention dry run on PostgreSQL: %+v; want %s only, scheduled deletion on", pv, id)
	}
	alice.must(200, "PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": 1}, nil)
	testsupport.Poll(t, 120*time.Second, func() error {
		if code, raw, _ := alice.do("GET", "/v1/workspaces/"+id, nil, nil); code != 404 {
			return fmt.Errorf("workspace still there (%d): %s", code, raw)
		}
		return nil
	})
	if containerExists(t, boxID) {
		t.Error("the retention tick removed the workspace but not its box")
	}
}

func pgStateIs(w workspace, state string) error {
	if w.State != state {
		return fmt.Errorf("workspace %s is %s, want %s", w.ID, w.State, state)
	}
	return nil
}
