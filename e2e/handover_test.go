package e2e

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// handOverLog is the log line of a hand-over that gave something.
const handOverLog = "handed what nobody owned to the first admin"

// TestServeHandsOverWhatNobodyOwns: serve runs without sign-in
// for a while (the launch token, owner ""), an account and a workspace
// are made, then sign-in is turned on. The first admin finds them (list,
// stream, actions that need the account's sealed token, the audit trail);
// the other user does not until he is removed, when what he made goes to
// her at once; a later start hands over nothing again. On
// SQLite and on PostgreSQL (users added through serve's database).
func TestServeHandsOverWhatNobodyOwns(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testHandOver(t, nil) })
	t.Run("postgres", func(t *testing.T) {
		urlFile := filepath.Join(t.TempDir(), "database-url")
		if err := os.WriteFile(urlFile, []byte(startPG(t)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		testHandOver(t, []string{"--database-file", urlFile})
	})
}

func testHandOver(t *testing.T, database []string) {
	_, apiURL := daytonaAPI(t)
	data, dir := t.TempDir(), t.TempDir()
	key := genKey(t, dir, "secret-key")
	// One address throughout, so alice's cookie jar follows her session
	// across the last restart.
	base := []string{"--listen", "127.0.0.1:" + freePort(t), "--secrets", "sealed", "--secret-key-file", key,
		"--docker-scope", dockerScope(t)}
	base = append(base, database...)
	acctID, id := makeOrphans(t, data, base, apiURL)

	addUser(t, data, "alice", "alice-password-1", database...) // the first user is an admin
	addUser(t, data, "bob", "bob-password-22", database...)
	signIn := append(base, "--auth", "local")
	p := start(t, options{mode: "serve", dataDir: data, args: signIn, env: noKeyring})
	if line := p.waitLog(handOverLog, map[string]string{"admin": "alice"}, 30*time.Second); line["accounts"] != 1.0 || line["workspaces"] != 1.0 {
		t.Fatalf("hand-over log line: %v, want 1 account and 1 workspace", line)
	}

	alice := newWebClient(t, p.ready.URL)
	alice.login("alice", "alice-password-1")
	var list struct{ Workspaces []workspace }
	alice.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 1 || list.Workspaces[0].ID != id {
		t.Fatalf("alice's workspaces: %+v, want %s", list.Workspaces, id)
	}
	ws, _ := alice.dialWS(-1, nil)
	if snap := ws.next(10 * time.Second); snap.Type != "snapshot" || len(snap.Workspaces) != 1 || snap.Workspaces[0].ID != id {
		t.Fatalf("alice's first stream message: %s", snap.Raw)
	}
	var accounts struct{ Accounts []struct{ ID string } }
	alice.must(200, "GET", "/v1/accounts", nil, &accounts)
	found := false
	for _, a := range accounts.Accounts {
		found = found || a.ID == acctID
	}
	if !found {
		t.Fatalf("alice's accounts %+v lack %s", accounts.Accounts, acctID)
	}
	// Pausing needs the account's sealed token: the account is hers now.
	alice.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	waitStateOn(t, alice, id, "paused")
	var audit struct {
		Entries []struct{ Action, Actor string }
	}
	alice.must(200, "GET", "/v1/audit", nil, &audit)
	handed := 0
	for _, e := range audit.Entries {
		if e.Action == "handover" && e.Actor == "hand-over" {
			handed++
		}
	}
	if handed != 2 {
		t.Fatalf("alice's audit trail has %d hand-over entries, want 2 (account, workspace): %+v", handed, audit.Entries)
	}

	bob := newWebClient(t, p.ready.URL)
	bob.login("bob", "bob-password-22")
	bob.must(404, "GET", "/v1/workspaces/"+id, nil, nil)
	bob.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 0 {
		t.Fatalf("bob sees %+v", list.Workspaces)
	}

	// Bob makes a workspace and is removed: it is alice's at once.
	_, bobsWs := bob.addDaytonaWith(apiURL, sealedToken, "bob's")
	waitStateOn(t, bob, bobsWs, "running")
	alice.must(404, "GET", "/v1/workspaces/"+bobsWs, nil, nil)
	bobStream, _ := bob.dialWS(-1, nil)
	if snap := bobStream.next(10 * time.Second); snap.Type != "snapshot" || len(snap.Workspaces) != 1 {
		t.Fatalf("bob's first stream message: %s", snap.Raw)
	}
	var users struct{ Users []struct{ ID, Name string } }
	alice.must(200, "GET", "/v1/users", nil, &users)
	for _, u := range users.Users {
		if u.Name == "bob" {
			alice.must(204, "DELETE", "/v1/users/"+u.ID, nil, nil)
		}
	}
	bob.must(401, "GET", "/v1/workspaces", nil, nil)
	if code := bobStream.closeCode(10 * time.Second); code != 4011 {
		t.Fatalf("removed bob's stream closed with %d, want 4011", code)
	}
	alice.must(200, "GET", "/v1/workspaces/"+bobsWs, nil, nil)
	alice.must(202, "POST", "/v1/workspaces/"+bobsWs+"/pause", nil, nil) // with bob's account, hers now
	waitStateOn(t, alice, bobsWs, "paused")
	p.term()

	p = start(t, options{mode: "serve", dataDir: data, args: signIn, env: noKeyring})
	alice.must(200, "GET", "/v1/workspaces/"+id, nil, nil) // answered once loaded, after any hand-over
	if lines := p.logs(handOverLog, nil); len(lines) != 0 {
		t.Fatalf("a later start handed over again: %v", lines)
	}
	alice.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 2 {
		t.Fatalf("after a restart alice has %d workspaces, want 2", len(list.Workspaces))
	}
}

// makeOrphans runs serve without sign-in on data (with base flags) and
// makes a Daytona account and a running workspace there, owned by nobody
// once sign-in is on; it returns their ids.
func makeOrphans(t *testing.T, data string, base []string, apiURL string) (acctID, id string) {
	t.Helper()
	p := start(t, options{mode: "serve", dataDir: data, args: base, env: noKeyring})
	early := newWebClient(t, p.ready.URL)
	early.bearer = p.ready.Token
	acctID, id = early.addDaytonaWith(apiURL, sealedToken, "before sign-in")
	waitStateOn(t, early, id, "running")
	p.term()
	return acctID, id
}

// TestServeProxyAdminTakesOverOnArrival: with --auth proxy the first user,
// and so the first admin, is made by the ingress's first request naming
// them, after start. What was made before sign-in is theirs by the time
// that request is answered, not at the next start; the next user named
// sees none of it.
func TestServeProxyAdminTakesOverOnArrival(t *testing.T) {
	_, apiURL := daytonaAPI(t)
	data, dir := t.TempDir(), t.TempDir()
	base := []string{"--listen", "127.0.0.1:" + freePort(t), "--secrets", "sealed", "--secret-key-file", genKey(t, dir, "secret-key"),
		"--docker-scope", dockerScope(t)}
	_, id := makeOrphans(t, data, base, apiURL)

	p := start(t, options{mode: "serve", dataDir: data, env: noKeyring,
		args: append(base, "--auth", "proxy", "--trusted-proxy", "127.0.0.2/32")})
	if lines := p.logs(handOverLog, nil); len(lines) != 0 {
		t.Fatalf("handed over with no admin yet: %v", lines)
	}
	as := func(user string) *webClient {
		c := newWebClient(t, p.ready.URL)
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 10 * time.Second}
		c.hc.Transport = contract.Transport(&http.Transport{DialContext: d.DialContext})
		c.header.Set("X-Forwarded-User", user)
		return c
	}
	var list struct{ Workspaces []workspace }
	carol := as("carol")
	carol.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 1 || list.Workspaces[0].ID != id {
		t.Fatalf("the first admin's first answer: %+v, want %s", list.Workspaces, id)
	}
	if line := p.waitLog(handOverLog, map[string]string{"admin": "carol"}, 10*time.Second); line["workspaces"] != 1.0 {
		t.Fatalf("hand-over log line: %v", line)
	}
	carol.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil) // with the account's sealed token: hers now
	waitStateOn(t, carol, id, "paused")
	as("dave").must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 0 {
		t.Fatalf("the second user sees %+v", list.Workspaces)
	}
	if lines := p.logs(handOverLog, nil); len(lines) != 1 {
		t.Fatalf("%d hand-overs, want the one at carol's arrival: %v", len(lines), lines)
	}
}
