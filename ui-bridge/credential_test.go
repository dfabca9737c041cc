package uibridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
)

// loginEnv is a server with local sign-in whose stream credentials are
// rechecked every minute of clock.
func loginEnv(t *testing.T, clock *fakeclock.Clock) (*testEnv, *Login) {
	t.Helper()
	st := openStore(t)
	var login *Login
	e := newEnvWith(t, st, &core.Registry{}, func(c *Config) {
		login = &Login{Auth: auth.New(auth.Config{Store: st, Now: clock.Now, Params: auth.Params{MemoryKiB: 64, Time: 1, Threads: 1}}), Local: true}
		c.Login = login
		c.Token = ""
		c.Clock = clock
		c.CredentialRecheck = time.Minute
	})
	return e, login
}

// signIn logs name in and returns the session cookie ("name=value").
func (e *testEnv) signIn(name, password string) string {
	e.t.Helper()
	resp, body := e.do("POST", "/v1/login", `{"name":"`+name+`","password":"`+password+`"}`, "Authorization", "", "Origin", e.base)
	if resp.StatusCode != 200 {
		e.t.Fatalf("login %s: %d %s", name, resp.StatusCode, body)
	}
	return strings.Split(resp.Header.Get("Set-Cookie"), ";")[0]
}

// dialWith opens a stream with one header (a cookie, a bearer token).
func (e *testEnv) dialWith(key, value string) *websocket.Conn {
	e.t.Helper()
	c, resp, err := e.dial(context.Background(), "", &dialOptions{HTTPHeader: http.Header{key: {value}, "Origin": {e.base}}})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		e.t.Fatalf("dial with %s: %v (HTTP %d)", key, err, status)
	}
	e.t.Cleanup(func() { c.Close() })
	if m := readMsg(e.t, c); m.Type != "snapshot" {
		e.t.Fatalf("first message %q, want the snapshot", m.Type)
	}
	return c
}

// expectClosed reads c until it closes and checks the close code.
func expectClosed(t *testing.T, c *websocket.Conn, code int) {
	t.Helper()
	for {
		_, err := tryReadMsg(c, 10*time.Second)
		if err == nil {
			continue
		}
		if got := closeStatus(err); got != code {
			t.Fatalf("stream ended with %v (code %d), want close code %d", err, got, code)
		}
		return
	}
}

// expectUpsert reads c's next message and checks it is the upsert of id:
// the stream is still open and fed.
func expectUpsert(t *testing.T, c *websocket.Conn, id string) {
	t.Helper()
	m := readMsg(t, c)
	if m.Type != "upsert" || m.Workspace == nil || m.Workspace.ID != id {
		t.Fatalf("message %q %+v, want the upsert of %s", m.Type, m.Workspace, id)
	}
}

// A stream ends when the credential that opened it ends: a logout or a
// token revocation through this server closes its streams at once (and
// only its own); a session ended elsewhere (another process deleted it)
// closes its stream at the next recheck, not before.
func TestStreamsEndWithTheirCredential(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	e, login := loginEnv(t, clock)
	ctx := context.Background()
	alice, err := login.Auth.AddLocalUser(ctx, "alice", "alice-password", false)
	if err != nil {
		t.Fatal(err)
	}
	cookieA, cookieB := e.signIn("alice", "alice-password"), e.signIn("alice", "alice-password")
	resp, body := e.do("POST", "/v1/tokens", `{"label":"ci"}`, "Authorization", "", "Cookie", cookieA, "Origin", e.base)
	if resp.StatusCode != 201 {
		t.Fatalf("create token: %d %s", resp.StatusCode, body)
	}
	var tok struct {
		Token string   `json:"token"`
		Info  APIToken `json:"info"`
	}
	if err := json.Unmarshal(body, &tok); err != nil {
		t.Fatal(err)
	}
	sa, sb := e.dialWith("Cookie", cookieA), e.dialWith("Cookie", cookieB)
	st := e.dialWith("Authorization", "Bearer "+tok.Token)
	// A browser's way: the token as a subprotocol entry.
	sp, _, err := e.dial(ctx, "", &dialOptions{Subprotocols: []string{Subprotocol, BearerSubprotocolPrefix + tok.Token},
		HTTPHeader: http.Header{"Origin": {e.base}}})
	if err != nil {
		t.Fatalf("dial with the token as a subprotocol: %v", err)
	}
	defer sp.Close()
	if m := readMsg(t, sp); m.Type != "snapshot" {
		t.Fatalf("first message %q", m.Type)
	}

	change := func() string {
		w := testWorkspace("w")
		w.Owner = alice.ID
		return e.save(w).ID
	}

	// Logout of session A closes A's stream only.
	if resp, body := e.do("POST", "/v1/logout", "", "Authorization", "", "Cookie", cookieA, "Origin", e.base); resp.StatusCode != 204 {
		t.Fatalf("logout: %d %s", resp.StatusCode, body)
	}
	expectClosed(t, sa, CloseSignedOut)
	id := change()
	expectUpsert(t, sb, id)
	expectUpsert(t, st, id)
	expectUpsert(t, sp, id)

	// Revoking the token closes the token's stream only.
	if resp, body := e.do("DELETE", "/v1/tokens/"+tok.Info.ID, "", "Authorization", "", "Cookie", cookieB, "Origin", e.base); resp.StatusCode != 204 {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	expectClosed(t, st, CloseSignedOut)
	expectClosed(t, sp, CloseSignedOut)
	id = change()
	expectUpsert(t, sb, id)

	// Session B is ended by another process: this server learns of it at
	// the next recheck.
	if err := e.st.DeleteSession(ctx, auth.HashSecret(strings.SplitN(cookieB, "=", 2)[1])); err != nil {
		t.Fatal(err)
	}
	id = change()
	expectUpsert(t, sb, id) // not closed before the recheck
	clock.WaitForWaiters(1, 10*time.Second)
	clock.Advance(time.Minute)
	expectClosed(t, sb, CloseSignedOut)
	if !strings.Contains(e.logs.String(), "closed streams whose credential ended") {
		t.Fatalf("no log line for the closed streams:\n%s", e.logs)
	}
	// Reconnecting with the ended session is refused.
	if _, resp, err := e.dial(ctx, "", &dialOptions{HTTPHeader: http.Header{"Cookie": {cookieB}, "Origin": {e.base}}}); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("reconnect with the ended session: %v, want 401", err)
	}
}

// switchable is a test authenticator whose one credential ends, or fails
// to be checked, when the test says so.
type switchable struct{ err atomic.Pointer[error] }

func (s *switchable) Authenticate(r *http.Request) (Identity, bool) {
	if r.Header.Get("X-Test-User") == "" {
		return Identity{}, false
	}
	return Identity{Owner: "u1", cred: &credential{key: "test:1", check: func(context.Context) error {
		if p := s.err.Load(); p != nil {
			return *p
		}
		return nil
	}}}, true
}

// A recheck that cannot reach the store leaves the stream open; one that
// finds the credential ended closes it.
func TestRecheckKeepsStreamsItCannotCheck(t *testing.T) {
	sw := &switchable{}
	e := newEnv(t, func(c *Config) { c.Authenticators = []Authenticator{sw} })
	c := e.dialWith("X-Test-User", "u1")
	down := error(core.Errorf(core.KindUnavailable, "the database is down"))
	sw.err.Store(&down)
	if n := e.srv.recheckOnce(context.Background()); n != 0 {
		t.Fatalf("a failed check closed %d streams", n)
	}
	w := testWorkspace("w")
	w.Owner = "u1"
	expectUpsert(t, c, e.save(w).ID)
	if !strings.Contains(e.logs.String(), "could not recheck a stream's credential") {
		t.Fatalf("the failed check is not logged:\n%s", e.logs)
	}
	ended := error(errors.Join(errors.New("lookup"), core.Errorf(core.KindUnauthorized, "signed out")))
	sw.err.Store(&ended)
	if n := e.srv.recheckOnce(context.Background()); n != 1 {
		t.Fatalf("an ended credential closed %d streams, want 1", n)
	}
	expectClosed(t, c, CloseSignedOut)
}
