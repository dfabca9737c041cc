package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestServeStreamsEndWithTheirCredential: companion serve --auth local.
// A logout closes the stream opened with that session at once (4012) and
// leaves the same user's other session's stream open; revoking an API
// token closes the stream opened with it; a user removed by the CLI (another
// process) loses their stream at the next --stream-recheck. Each ended
// credential is refused on reconnect.
func TestServeStreamsEndWithTheirCredential(t *testing.T) {
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	addUser(t, data, "bob", "bob-password-22")
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--stream-recheck", "300ms", "--docker-scope", "unused"}})

	a1, a2 := newWebClient(t, p.ready.URL), newWebClient(t, p.ready.URL)
	a1.login("alice", "alice-password-1")
	a2.login("alice", "alice-password-1")
	var tok struct {
		Token string
		Info  struct{ ID string }
	}
	a1.must(201, "POST", "/v1/tokens", map[string]any{"label": "script"}, &tok)
	script := newWebClient(t, p.ready.URL)
	script.bearer = tok.Token
	bob := newWebClient(t, p.ready.URL)
	bob.login("bob", "bob-password-22")

	s1, s2 := openStream(t, a1, "alice's (session 1)"), openStream(t, a2, "alice's (session 2)")
	ss, sb := openStream(t, script, "the script's"), openStream(t, bob, "bob's")
	alive := func(s *stream, who string) {
		t.Helper()
		if err := s.ping(10 * time.Second); err != nil {
			t.Fatalf("%s's stream: %v", who, err)
		}
	}
	refused := func(c *webClient, who string) {
		t.Helper()
		if _, code := c.dialWS(-1, nil); code != 401 {
			t.Fatalf("%s reconnecting with an ended credential: handshake %d, want 401", who, code)
		}
	}

	a1.must(204, "POST", "/v1/logout", nil, nil)
	if code := s1.closeCode(10 * time.Second); code != 4012 {
		t.Fatalf("the logged-out session's stream closed with %d, want 4012", code)
	}
	alive(s2, "alice's other session")
	alive(ss, "the script")
	refused(a1, "alice (logged out)")

	a2.must(204, "DELETE", "/v1/tokens/"+tok.Info.ID, nil, nil)
	if code := ss.closeCode(10 * time.Second); code != 4012 {
		t.Fatalf("the revoked token's stream closed with %d, want 4012", code)
	}
	alive(s2, "alice's other session")
	refused(script, "the script (revoked)")

	out := cli(t, "", "users", "remove", "--data-dir", data, "bob")
	if !strings.Contains(out, "bob") {
		t.Fatalf("users remove said %q", out)
	}
	if code := sb.closeCode(10 * time.Second); code != 4012 {
		t.Fatalf("removed bob's stream closed with %d, want 4012", code)
	}
	alive(s2, "alice's other session")
	refused(bob, "bob (removed)")
	if lines := p.logs("closed streams whose credential ended", nil); len(lines) < 3 {
		t.Fatalf("%d log lines for closed streams, want one per ended credential: %v", len(lines), lines)
	}
}

// openStream opens c's stream and reads its snapshot.
func openStream(t *testing.T, c *webClient, which string) *stream {
	t.Helper()
	s, code := c.dialWS(-1, nil)
	if code != 101 {
		t.Fatalf("%s stream: handshake %d", which, code)
	}
	if m := s.next(10 * time.Second); m.Type != "snapshot" {
		t.Fatalf("%s stream's first message: %s", which, m.Raw)
	}
	return s
}
