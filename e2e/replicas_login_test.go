package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// TestReplicasShareLoginState: two serve replicas on one PostgreSQL share
// what a sign-in depends on. A password guessed on replica A until it is
// locked out is refused on replica B too, even the right one; a session
// cookie from a sign-in on A works on B; a token made on B works on A and
// one revoked on A fails on B; signing out on B ends the session on A.
// The streams opened on one replica end (4012) when their token is revoked
// or their session ended on the other, at that replica's next
// --stream-recheck.
func TestReplicasShareLoginState(t *testing.T) {
	rs := startReplicas(t, 2, replicaOpts{Args: []string{"--stream-recheck", "300ms"}})
	a, b := rs.Replicas[0].ready.URL, rs.Replicas[1].ready.URL
	addUser(t, t.TempDir(), "bob", "bob-password-22", "--database-file", rs.dbFile)

	// Guessing bob's password on A until A refuses ...
	guesser := newWebClient(t, a)
	for i := range 5 {
		if code, raw, _ := guesser.do("POST", "/v1/login", map[string]string{"name": "bob", "password": fmt.Sprintf("guess-%d-xx", i)}, nil); code != 401 {
			t.Fatalf("guess %d on A: %d %s, want 401", i, code, raw)
		}
	}
	if code, raw, _ := guesser.do("POST", "/v1/login", map[string]string{"name": "bob", "password": "bob-password-22"}, nil); code != 429 {
		t.Fatalf("bob's password on A after 5 guesses: %d %s, want 429", code, raw)
	}
	// ... is refused on B as well: switching replicas gains nothing.
	other := newWebClient(t, b)
	code, raw, h := other.do("POST", "/v1/login", map[string]string{"name": "bob", "password": "bob-password-22"}, nil)
	if code != 429 || h.Get("Retry-After") == "" {
		t.Fatalf("bob's password on B after 5 guesses on A: %d %s (Retry-After %q), want 429 with Retry-After", code, raw, h.Get("Retry-After"))
	}

	// A session started on A is valid on B.
	onA := newWebClient(t, a)
	onA.login("alice", "alice-password-1")
	cookie := onA.cookieHeader()
	if cookie == "" {
		t.Fatal("no session cookie after signing in on A")
	}
	onB := newWebClient(t, b)
	onB.header.Set("Cookie", cookie)
	var me struct {
		User struct{ Name string } `json:"user"`
	}
	onB.must(200, "GET", "/v1/me", nil, &me)
	if me.User.Name != "alice" {
		t.Fatalf("GET /v1/me on B with A's cookie: %+v, want alice", me)
	}
	onA.must(200, "GET", "/v1/me", nil, nil)

	// A token made on B works on A; revoked on A, it stops working on B.
	var made struct {
		Token string              `json:"token"`
		Info  struct{ ID string } `json:"info"`
	}
	onB.must(201, "POST", "/v1/tokens", map[string]any{"label": "ci"}, &made)
	byToken := func(base string) *webClient { c := newWebClient(t, base); c.bearer = made.Token; return c }
	byToken(a).must(200, "GET", "/v1/me", nil, nil)
	tokenStream := openStream(t, byToken(b), "the token's on B")
	onA.must(204, "DELETE", "/v1/tokens/"+made.Info.ID, nil, nil)
	if code, raw, _ := byToken(b).do("GET", "/v1/me", nil, nil); code != 401 {
		t.Fatalf("GET /v1/me on B with a token revoked on A: %d %s, want 401", code, raw)
	}
	if code := tokenStream.closeCode(10 * time.Second); code != 4012 {
		t.Fatalf("the stream on B of a token revoked on A closed with %d, want 4012", code)
	}
	sessionStream := openStream(t, onA, "the session's on A")

	// Signing out on B ends the session on A (A believes a confirmed
	// session for at most a second, so it is polled).
	onB.must(204, "POST", "/v1/logout", nil, nil)
	testsupport.Poll(t, 10*time.Second, func() error {
		if code, _, _ := onA.do("GET", "/v1/me", nil, nil); code != 401 {
			return fmt.Errorf("GET /v1/me on A after signing out on B: %d, want 401", code)
		}
		return nil
	})
	if code := sessionStream.closeCode(10 * time.Second); code != 4012 {
		t.Fatalf("the stream on A of a session ended on B closed with %d, want 4012", code)
	}
}

// TestAccountsCLIOnPostgres: `companion accounts add|list|remove` work on
// the database the replicas share (--database-file), while they run: an
// account added with the CLI is listed by every replica and its sealed
// token works there, and a removed one is gone from all of them.
func TestAccountsCLIOnPostgres(t *testing.T) {
	_, apiURL := daytonaAPI(t)
	rs := startReplicas(t, 2, replicaOpts{})
	data := t.TempDir()
	acct := rs.addAccountCLI(data, "team", apiURL)

	stdout, errs, code := runCLI(t, noKeyring, "", "accounts", "list", "--json", "--database-file", rs.dbFile, "--data-dir", data)
	if code != 0 || !strings.Contains(stdout, acct) {
		t.Fatalf("accounts list --database-file: exit %d: %s%s", code, stdout, errs)
	}
	ids := func(base string) []string {
		var l struct{ Accounts []struct{ ID string } }
		rs.client(base).must(200, "GET", "/v1/accounts", nil, &l)
		var out []string
		for _, a := range l.Accounts {
			out = append(out, a.ID)
		}
		return out
	}
	for i, p := range rs.Replicas {
		if got := ids(p.ready.URL); !slices.Contains(got, acct) {
			t.Fatalf("replica %d lists %q, want the CLI's %s", i, got, acct)
		}
	}
	// A replica reads the sealed token the CLI wrote: a Daytona workspace
	// on the account, created through B, starts.
	onB := rs.client(rs.Replicas[1].ready.URL)
	var created struct{ Workspace struct{ ID string } }
	onB.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "cli-account"}, &created)
	testsupport.Poll(t, 60*time.Second, func() error {
		var w struct{ Workspace struct{ State, Error string } }
		if code, raw, _ := onB.do("GET", "/v1/workspaces/"+created.Workspace.ID, nil, &w); code != 200 {
			return fmt.Errorf("GET the workspace on B: %d %s", code, raw)
		}
		if w.Workspace.State != "running" {
			return fmt.Errorf("the workspace is %s (%s), want running", w.Workspace.State, w.Workspace.Error)
		}
		return nil
	})

	stdout, errs, code = runCLI(t, noKeyring, "", "accounts", "remove", acct, "--user", "alice", "--database-file", rs.dbFile,
		"--data-dir", data, "--secrets", "sealed", "--secret-key-file", rs.SecretKey)
	if code != 0 || !strings.Contains(stdout, "Removed account "+acct) {
		t.Fatalf("accounts remove --database-file: exit %d: %s%s", code, stdout, errs)
	}
	for i, p := range rs.Replicas {
		if got := ids(p.ready.URL); slices.Contains(got, acct) {
			t.Fatalf("replica %d still lists %s after the CLI removed it: %q", i, acct, got)
		}
	}
}
