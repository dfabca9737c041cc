package auth_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
)

// cheap keeps unit tests fast; the real parameters are measured in
// make bench.
var cheap = auth.Params{MemoryKiB: 64, Time: 1, Threads: 1}

func newService(t *testing.T, lim auth.Limits) (*auth.Service, *fakeclock.Clock, *db.Store) {
	t.Helper()
	store, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := fakeclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	return auth.New(auth.Config{Store: store, Now: clk.Now, IdleTimeout: time.Hour, MaxAge: 4 * time.Hour, Params: cheap, Limits: lim}), clk, store
}

func kindOf(err error) core.ErrorKind {
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce.Kind
	}
	return ""
}

func TestPasswordHashCarriesItsParameters(t *testing.T) {
	h, err := auth.HashPassword("correct horse", auth.Params{MemoryKiB: 128, Time: 2, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=128,t=2,p=1$") {
		t.Fatalf("hash %q does not carry its parameters", h)
	}
	if !auth.VerifyPassword("correct horse", h) || auth.VerifyPassword("correct horsf", h) {
		t.Fatal("verify is wrong")
	}
	for _, bad := range []string{"", "$argon2id$v=19$m=1073741824,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5", h[:len(h)-3], "$argon2i" + h[9:]} {
		if auth.VerifyPassword("correct horse", bad) {
			t.Errorf("malformed or hostile hash %q verified", bad)
		}
	}
}

func TestFirstUserIsAdminAndNamesAreChecked(t *testing.T) {
	svc, _, _ := newService(t, auth.Limits{})
	ctx := context.Background()
	a, err := svc.AddLocalUser(ctx, "alice", "alice-password", false)
	if err != nil || !a.Admin {
		t.Fatalf("first user: %+v %v, want admin", a, err)
	}
	b, err := svc.AddLocalUser(ctx, "bob", "bob-password", false)
	if err != nil || b.Admin {
		t.Fatalf("second user: %+v %v, want no admin", b, err)
	}
	if _, err := svc.AddLocalUser(ctx, "bob", "bob-password", false); kindOf(err) != core.KindConflict {
		t.Fatalf("duplicate user: %v", err)
	}
	for _, name := range []string{"", "-x", "a b", "ali\u00e7e", strings.Repeat("a", 65)} {
		if _, err := svc.AddLocalUser(ctx, name, "long-enough-pw", false); kindOf(err) != core.KindInvalid {
			t.Errorf("name %q: %v, want invalid", name, err)
		}
	}
	if _, err := svc.AddLocalUser(ctx, "carol", "short", false); kindOf(err) != core.KindInvalid {
		t.Errorf("short password: %v", err)
	}
	// An OpenID user is keyed by (issuer, subject), not by name.
	o1, err := svc.ExternalUser(ctx, "https://id.example", "sub-1", "alice")
	o2, _ := svc.ExternalUser(ctx, "https://id.example", "sub-1", "renamed")
	if err != nil || o1.ID != o2.ID || o1.ID == a.ID || o1.Admin {
		t.Fatalf("external user: %+v %+v %v", o1, o2, err)
	}
	// Two people never share a name: the local alice had it, so the
	// OpenID alice is marked with her subject; so is a second one.
	if o1.Name != "alice (sub-1)" {
		t.Errorf("an OpenID user named like a local one is listed as %q, want it marked with the subject", o1.Name)
	}
	o3, err := svc.ExternalUser(ctx, "https://other.example", "sub-3", "dora")
	o4, err2 := svc.ExternalUser(ctx, "https://id.example", "sub-4", "dora")
	if err != nil || err2 != nil || o3.Name != "dora" || o4.Name != "dora (sub-4)" {
		t.Errorf("two OpenID doras: %q and %q (%v, %v); want the second marked", o3.Name, o4.Name, err, err2)
	}
	if _, err := svc.ExternalUser(ctx, auth.IssuerLocal, "alice", "alice"); kindOf(err) != core.KindInvalid {
		t.Fatalf("external user claiming the local issuer: %v", err)
	}
	// A proxy user of the same name is another user.
	p, err := svc.ProxyUser(ctx, "alice")
	if err != nil || p.ID == a.ID || p.Admin {
		t.Fatalf("proxy alice: %+v %v", p, err)
	}
}

func TestSessionsExpireAndEnd(t *testing.T) {
	svc, clk, store := newService(t, auth.Limits{})
	ctx := context.Background()
	u, _ := svc.AddLocalUser(ctx, "alice", "alice-password", false)
	secret, _, err := svc.Login(ctx, "alice", "alice-password", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := svc.Session(ctx, secret); err != nil || got.ID != u.ID {
		t.Fatalf("fresh session: %+v %v", got, err)
	}
	// Used every 50 minutes it outlives the idle timeout (1 h) ...
	for i := 0; i < 4; i++ {
		clk.Advance(50 * time.Minute)
		if _, err := svc.Session(ctx, secret); err != nil {
			t.Fatalf("session used every 50 min refused after %d uses: %v", i, err)
		}
	}
	// ... but not the absolute expiry (4 h).
	clk.Advance(50 * time.Minute)
	if _, err := svc.Session(ctx, secret); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("session past its absolute expiry: %v", err)
	}
	// Idle expiry.
	s2, _, _ := svc.Login(ctx, "alice", "alice-password", "10.0.0.1")
	clk.Advance(61 * time.Minute)
	if _, err := svc.Session(ctx, s2); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("idle session: %v", err)
	}
	// Logout and password change end sessions.
	s3, _, _ := svc.Login(ctx, "alice", "alice-password", "10.0.0.1")
	s4, _, _ := svc.Login(ctx, "alice", "alice-password", "10.0.0.1")
	if err := svc.Logout(ctx, s3); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Session(ctx, s3); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("logged-out session: %v", err)
	}
	if _, err := svc.Session(ctx, s4); err != nil {
		t.Fatalf("the other session ended with the logout: %v", err)
	}
	if err := svc.SetPassword(ctx, u.ID, "new-password-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Session(ctx, s4); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("session after a password change: %v", err)
	}
	if _, _, err := svc.Login(ctx, "alice", "alice-password", "10.0.0.1"); !errors.Is(err, auth.ErrBadLogin) {
		t.Fatalf("old password: %v", err)
	}
	// Another process (the CLI) changing the password: believed by this
	// one within the cache time.
	s5, _, _ := svc.Login(ctx, "alice", "new-password-1", "10.0.0.1")
	other := auth.New(auth.Config{Store: store, Now: clk.Now, Params: cheap})
	if err := other.SetPassword(ctx, u.ID, "newer-password-2"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if _, err := svc.Session(ctx, s5); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("session a second after another process changed the password: %v", err)
	}
	// Removing the user ends their sessions in this process at once,
	// though the session was believed a moment ago.
	s6, _, _ := svc.Login(ctx, "alice", "newer-password-2", "10.0.0.1")
	if _, err := svc.Session(ctx, s6); err != nil {
		t.Fatalf("fresh session: %v", err)
	}
	if err := svc.RemoveUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Session(ctx, s6); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("session of a removed user: %v", err)
	}
	// Forged secrets.
	for _, f := range []string{"", "cps_", "cps_" + strings.Repeat("A", 43), s4 + "x"} {
		if _, err := svc.Session(ctx, f); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("forged session %q: %v", f, err)
		}
	}
}

func TestUnknownUserAndWrongPasswordAnswerAlike(t *testing.T) {
	svc, _, _ := newService(t, auth.Limits{})
	ctx := context.Background()
	svc.AddLocalUser(ctx, "alice", "alice-password", false)
	_, _, e1 := svc.Login(ctx, "alice", "wrong-password", "10.0.0.1")
	_, _, e2 := svc.Login(ctx, "mallory", "wrong-password", "10.0.0.2")
	if e1 == nil || e1.Error() != e2.Error() {
		t.Fatalf("wrong password %v, unknown user %v: want the same error", e1, e2)
	}
}

func TestFailedLoginLimits(t *testing.T) {
	lim := auth.Limits{PerUserAddr: 3, UserAddrWindow: 15 * time.Minute, PerAddr: 10, AddrWindow: 15 * time.Minute,
		PerUser: 5, UserWindow: time.Minute, KnownFor: 24 * time.Hour}
	svc, clk, _ := newService(t, lim)
	ctx := context.Background()
	svc.AddLocalUser(ctx, "alice", "alice-password", false)
	// Alice signs in from her usual address once.
	if _, _, err := svc.Login(ctx, "alice", "alice-password", "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	// One attacker address: 3 guesses, then refused, right password too.
	for i := 0; i < 3; i++ {
		if _, _, err := svc.Login(ctx, "alice", "guess", "6.6.6.6"); !errors.Is(err, auth.ErrBadLogin) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if _, _, err := svc.Login(ctx, "alice", "alice-password", "6.6.6.6"); kindOf(err) != core.KindRateLimited {
		t.Fatalf("4th try from the guessing address: %v, want rate limited", err)
	}
	// Many attacker addresses trip the loose per-user limit ...
	for i := 0; i < 5; i++ {
		svc.Login(ctx, "alice", "guess", "7.7.7."+string(rune('0'+i)))
	}
	if _, _, err := svc.Login(ctx, "alice", "alice-password", "8.8.8.8"); kindOf(err) != core.KindRateLimited {
		t.Fatalf("new address during a spray: %v, want rate limited", err)
	}
	// ... which never locks alice out from her known address ...
	if _, _, err := svc.Login(ctx, "alice", "alice-password", "10.0.0.1"); err != nil {
		t.Fatalf("alice from her known address during a spray: %v", err)
	}
	// ... and from a new one only for the short window.
	clk.Advance(61 * time.Second)
	if _, _, err := svc.Login(ctx, "alice", "alice-password", "8.8.8.8"); err != nil {
		t.Fatalf("alice from a new address a minute later: %v", err)
	}
	// The strict (user, address) limit lasts its window.
	if _, _, err := svc.Login(ctx, "alice", "alice-password", "6.6.6.6"); kindOf(err) != core.KindRateLimited {
		t.Fatalf("guessing address after a minute: %v, want still limited", err)
	}
	clk.Advance(15 * time.Minute)
	if _, _, err := svc.Login(ctx, "alice", "alice-password", "6.6.6.6"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

func TestTokens(t *testing.T) {
	svc, clk, _ := newService(t, auth.Limits{})
	ctx := context.Background()
	a, _ := svc.AddLocalUser(ctx, "alice", "alice-password", false)
	b, _ := svc.AddLocalUser(ctx, "bob", "bob-password1", false)
	secret, tok, err := svc.CreateToken(ctx, a.ID, "ci", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if tk, u, err := svc.TokenUser(ctx, secret); err != nil || u.ID != a.ID || tk.UserID != a.ID {
		t.Fatalf("token: %+v %v", u, err)
	}
	if list, _ := svc.ListTokens(ctx, a.ID); len(list) != 1 || !list[0].LastUsedAt.Equal(clk.Now()) {
		t.Fatalf("alice's tokens after a use: %+v, want last used now", list)
	}
	if err := svc.RevokeToken(ctx, b.ID, tok.ID); kindOf(err) != core.KindNotFound {
		t.Fatalf("bob revokes alice's token: %v, want not found", err)
	}
	if list, _ := svc.ListTokens(ctx, b.ID); len(list) != 0 {
		t.Fatalf("bob lists %+v", list)
	}
	clk.Advance(time.Hour)
	if _, _, err := svc.TokenUser(ctx, secret); !errors.Is(err, auth.ErrBadToken) {
		t.Fatalf("expired token: %v", err)
	}
	s2, t2, _ := svc.CreateToken(ctx, a.ID, "forever", 0)
	if err := svc.RevokeToken(ctx, a.ID, t2.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.TokenUser(ctx, s2); !errors.Is(err, auth.ErrBadToken) {
		t.Fatalf("revoked token: %v", err)
	}
	if _, _, err := svc.CreateToken(ctx, a.ID, "x", -time.Second); kindOf(err) != core.KindInvalid {
		t.Fatalf("negative lifetime: %v", err)
	}
	// Removing the user ends their tokens.
	s3, _, _ := svc.CreateToken(ctx, b.ID, "", 0)
	if err := svc.RemoveUser(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.TokenUser(ctx, s3); !errors.Is(err, auth.ErrBadToken) {
		t.Fatalf("removed user's token: %v", err)
	}
}

// TestFailedLoginLimitsOutliveTheService: the counts live in the store, so
// a restarted process (or another replica on the same database) still
// refuses an address that was locked out.
func TestFailedLoginLimitsOutliveTheService(t *testing.T) {
	lim := auth.Limits{PerUserAddr: 2, UserAddrWindow: 15 * time.Minute, PerAddr: 10, AddrWindow: 15 * time.Minute,
		PerUser: 50, UserWindow: time.Minute, KnownFor: time.Hour}
	svc, clk, store := newService(t, lim)
	ctx := context.Background()
	svc.AddLocalUser(ctx, "alice", "alice-password", false)
	for range 2 {
		svc.Login(ctx, "alice", "guess", "6.6.6.6")
	}
	other := auth.New(auth.Config{Store: store, Now: clk.Now, Params: cheap, Limits: lim})
	if _, _, err := other.Login(ctx, "alice", "alice-password", "6.6.6.6"); kindOf(err) != core.KindRateLimited {
		t.Fatalf("another service on the same store: %v, want rate limited", err)
	}
	if _, _, err := other.Login(ctx, "alice", "alice-password", "10.0.0.1"); err != nil {
		t.Fatalf("another address: %v", err)
	}
}
