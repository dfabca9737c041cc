package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// TestMigrateSQLiteToPostgresWithLogins: a `serve --auth local`
// installation on SQLite moves to PostgreSQL and its people notice
// nothing. A user, her signed-in browser session (the same cookie), her
// API token, an account with a sealed provider token and a workspace on
// it, all made before the migration, work on the PostgreSQL serve after;
// a wrong password is still refused and a session signed out afterwards
// is gone.
func TestMigrateSQLiteToPostgresWithLogins(t *testing.T) {
	_, apiURL := daytonaAPI(t)
	url := startPG(t)
	data, dir := t.TempDir(), t.TempDir()
	key := genKey(t, dir, "secret-key")
	addUser(t, data, "alice", "alice-password-1")
	token := strings.TrimSpace(cli(t, "", "tokens", "create", "--user", "alice", "--data-dir", data))
	// The same address before and after, so the browser's cookie jar
	// sends its cookie to the new serve as it would behind one hostname.
	port := freePort(t)
	base := []string{"--listen", "127.0.0.1:" + port, "--auth", "local", "--secrets", "sealed", "--secret-key-file", key,
		"--docker-scope", dockerScope(t)}
	p := start(t, options{mode: "serve", dataDir: data, args: base, env: noKeyring})

	browser := newWebClient(t, p.ready.URL)
	browser.login("alice", "alice-password-1")
	browser.must(200, "GET", "/v1/me", nil, nil)
	api := newWebClient(t, p.ready.URL)
	api.bearer = token
	acctID, id := api.addDaytonaWith(apiURL, sealedToken, "moved")
	waitStateOn(t, api, id, "running")
	p.term()

	out, err := runCompanion(t, "migrate", "sqlite-to-postgres", "--from", data, "--to", url)
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	for _, want := range []string{`"table":"users","rows":1`, `"table":"sessions","rows":1`, `"table":"api_tokens","rows":1`} {
		if !strings.Contains(out, want) {
			t.Fatalf("migrate report lacks %s:\n%s", want, out)
		}
	}

	p = start(t, options{mode: "serve", dataDir: data, args: append(base, "--database", url), env: noKeyring})
	if p.ready.URL != browser.base {
		t.Fatalf("serve moved from %s to %s; the cookie would not follow", browser.base, p.ready.URL)
	}
	var me struct{ User struct{ Name string } }
	browser.must(200, "GET", "/v1/me", nil, &me)
	if me.User.Name != "alice" {
		t.Fatalf("the migrated session is %+v, want alice's", me)
	}
	api.must(200, "GET", "/v1/me", nil, &me)
	if me.User.Name != "alice" {
		t.Fatalf("the migrated token is %+v, want alice's", me)
	}
	// The account's sealed token opens on PostgreSQL: the workspace made
	// before pauses, and a new one starts.
	api.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	waitStateOn(t, api, id, "paused")
	var created struct{ Workspace workspace }
	browser.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acctID, "name": "after"}, &created)
	waitStateOn(t, browser, created.Workspace.ID, "running")

	anon := newWebClient(t, p.ready.URL)
	if code, raw, _ := anon.do("POST", "/v1/login", map[string]string{"name": "alice", "password": "not-her-password"}, nil); code != 401 {
		t.Fatalf("wrong password after the migration: %d %s, want 401", code, raw)
	}
	fresh := newWebClient(t, p.ready.URL)
	fresh.login("alice", "alice-password-1")
	browser.must(204, "POST", "/v1/logout", nil, nil)
	if code, _, _ := browser.do("GET", "/v1/me", nil, nil); code != 401 {
		t.Fatalf("GET /v1/me after signing out: %d, want 401", code)
	}
	fresh.must(200, "GET", "/v1/me", nil, nil)
}

// waitStateOn polls GET /v1/workspaces/{id} with c until it is in state.
func waitStateOn(t *testing.T, c *webClient, id, state string) {
	t.Helper()
	testsupport.Poll(t, 60*time.Second, func() error {
		var w struct{ Workspace workspace }
		if code, raw, _ := c.do("GET", "/v1/workspaces/"+id, nil, &w); code != 200 || w.Workspace.State != state {
			return fmt.Errorf("workspace %s is not %s yet: %d %s", id, state, code, raw)
		}
		return nil
	})
}
