package e2e

import (
	"bytes"
	"testing"
	"time"
)

// TestServeSharedDocker: in serve mode with sign-in the built-in Docker
// account is the first admin's and shared; a box bob makes on it is bob's
// alone (the admin included gets 404), and only the admin may remove the
// account.
func TestServeSharedDocker(t *testing.T) {
	// dockerScope removes every container of the scope when the test ends.
	image, scope := boxImage(t), dockerScope(t)
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	addUser(t, data, "bob", "bob-password-22")
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--docker-image", image, "--docker-scope", scope}})
	alice, bob := newWebClient(t, p.ready.URL), newWebClient(t, p.ready.URL)
	alice.login("alice", "alice-password-1")
	bob.login("bob", "bob-password-22")

	var accts struct {
		Accounts []struct {
			ID       string
			Provider string
			Shared   bool
		}
	}
	for _, c := range []*webClient{alice, bob} {
		c.must(200, "GET", "/v1/accounts", nil, &accts)
		if len(accts.Accounts) != 1 || accts.Accounts[0].ID != "local-docker" || !accts.Accounts[0].Shared {
			t.Fatalf("accounts: %+v, want the shared local-docker", accts)
		}
	}
	bobWS, _ := bob.dialWS(-1, nil)
	bobWS.next(10 * time.Second)
	aliceWS, _ := alice.dialWS(-1, nil)
	aliceWS.next(10 * time.Second)
	var ws struct{ Workspace workspace }
	bob.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "bobs-box"}, &ws)
	id := ws.Workspace.ID
	bobWS.waitFor("bob's docker box running", 120*time.Second, upsertOf(id, "running"))

	alice.must(404, "GET", "/v1/workspaces/"+id, nil, nil)
	alice.must(404, "POST", "/v1/workspaces/"+id+"/pause", map[string]any{}, nil)
	if raw := alice.must(200, "GET", "/v1/workspaces", nil, nil); bytes.Contains(raw, []byte(id)) {
		t.Fatalf("alice lists bob's box: %s", raw)
	}
	bob.must(404, "DELETE", "/v1/accounts/local-docker", nil, nil)

	// Bob pauses his box; alice's stream never hears of it.
	bob.must(202, "POST", "/v1/workspaces/"+id+"/pause", map[string]any{}, nil)
	bobWS.waitFor("bob's box paused", 120*time.Second, upsertOf(id, "paused"))
	var mine struct{ Workspace workspace }
	alice.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "alices-box"}, &mine)
	aliceWS.waitFor("alice's own box", 120*time.Second, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.ID == mine.Workspace.ID
	})
	if bytes.Contains([]byte(aliceWS.seen.String()), []byte(id)) {
		t.Fatalf("alice's stream carried bob's box:\n%s", aliceWS.seen.String())
	}
}
