package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestAccountsCLIPerUser: on a serve installation with users, `companion
// accounts add|list|remove` work for a named user (--user): the account is
// theirs in serve (others get 404), an admin may add a shared one, and an
// add without an owner is refused with nothing written.
func TestAccountsCLIPerUser(t *testing.T) {
	_, apiURL := daytonaAPI(t)
	data, keys := t.TempDir(), t.TempDir()
	key := genKey(t, keys, "k")
	addUser(t, data, "alice", "alice-password-1") // the first user: admin
	addUser(t, data, "bob", "bob-password-22")
	add := func(extra ...string) (string, string, int) {
		args := append([]string{"accounts", "add", "daytona", "--config", "api_url=" + apiURL, "--data-dir", data,
			"--secrets", "sealed", "--secret-key-file", key}, extra...)
		return runCLI(t, noKeyring, sealedToken+"\n", args...)
	}
	list := func(user string) []string {
		stdout, errs, code := runCLI(t, noKeyring, "", "accounts", "list", "--json", "--data-dir", data, "--user", user)
		if code != 0 {
			t.Fatalf("accounts list --user %s: %s", user, errs)
		}
		var l struct{ Accounts []struct{ Label string } }
		if err := json.Unmarshal([]byte(stdout), &l); err != nil {
			t.Fatalf("accounts list: %q: %v", stdout, err)
		}
		var labels []string
		for _, a := range l.Accounts {
			labels = append(labels, a.Label)
		}
		slices.Sort(labels)
		return labels
	}

	// Refused: no owner on a data dir with users; sharing by a non-admin.
	if _, errs, code := add("--label", "nobody"); code == 0 || !strings.Contains(errs, "--user NAME") {
		t.Fatalf("add without --user: exit %d: %s", code, errs)
	}
	if _, errs, code := add("--label", "bob-team", "--user", "bob", "--shared"); code == 0 || !strings.Contains(errs, "not an admin") {
		t.Fatalf("add --shared by a non-admin: exit %d: %s", code, errs)
	}
	if _, errs, code := add("--label", "x", "--user", "nosuch"); code == 0 || !strings.Contains(errs, "no user") {
		t.Fatalf("add for an unknown user: exit %d: %s", code, errs)
	}
	stdout, errs, code := add("--label", "bobs", "--user", "bob")
	if code != 0 {
		t.Fatalf("add --user bob: %s", errs)
	}
	bobAcct := addedID(t, stdout)
	if stdout, errs, code = add("--label", "team", "--user", "alice", "--shared"); code != 0 {
		t.Fatalf("add --user alice --shared: %s", errs)
	}
	shared := addedID(t, stdout)
	if got := list("alice"); !slices.Equal(got, []string{"team"}) {
		t.Fatalf("alice's accounts %q, want only the shared team (nobody, bob-team and x were refused)", got)
	}
	if got := list("bob"); !slices.Equal(got, []string{"bobs", "team"}) {
		t.Fatalf("bob's accounts %q, want bobs and the shared team", got)
	}
	if _, errs, code := runCLI(t, noKeyring, "", "accounts", "remove", bobAcct, "--user", "alice", "--data-dir", data,
		"--secrets", "sealed", "--secret-key-file", key); code == 0 || !strings.Contains(errs, "not found") {
		t.Fatalf("remove bob's account as alice: exit %d: %s", code, errs)
	}

	// In serve, each sees what the CLI gave them.
	p := start(t, options{mode: "serve", dataDir: data, env: noKeyring, args: []string{"--auth", "local", "--listen", "127.0.0.1:0", "--docker-scope", "unused",
		"--secrets", "sealed", "--secret-key-file", key}})
	alice, bob := newWebClient(t, p.ready.URL), newWebClient(t, p.ready.URL)
	alice.login("alice", "alice-password-1")
	bob.login("bob", "bob-password-22")
	ids := func(c *webClient) []string {
		var l struct{ Accounts []struct{ ID string } }
		c.must(200, "GET", "/v1/accounts", nil, &l)
		var out []string
		for _, a := range l.Accounts {
			out = append(out, a.ID)
		}
		return out
	}
	if got := ids(bob); !slices.Contains(got, bobAcct) || !slices.Contains(got, shared) {
		t.Fatalf("bob's accounts in serve %q, want %s and %s", got, bobAcct, shared)
	}
	if got := ids(alice); slices.Contains(got, bobAcct) || !slices.Contains(got, shared) {
		t.Fatalf("alice's accounts in serve %q: want the shared one and not bob's", got)
	}
	alice.must(404, "DELETE", "/v1/accounts/"+bobAcct, nil, nil)
	bob.must(404, "DELETE", "/v1/accounts/"+shared, nil, nil)
	p.terminate()

	if _, errs, code := runCLI(t, noKeyring, "", "accounts", "remove", bobAcct, "--user", "bob", "--data-dir", data,
		"--secrets", "sealed", "--secret-key-file", key); code != 0 {
		t.Fatalf("remove bob's account as bob: %s", errs)
	}
	// Serve made the built-in Docker account alice's and shared.
	if got := list("bob"); !slices.Equal(got, []string{"Local Docker", "team"}) {
		t.Fatalf("bob's accounts after remove %q, want the shared ones only", got)
	}
}
