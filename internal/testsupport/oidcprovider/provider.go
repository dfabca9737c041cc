package oidcprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// What the example server knows, from example/server/main.go and
// storage/user.go at ZitadelVersion: a confidential client "web" (secret
// "secret", client_secret_basic, http redirect URLs allowed) and two users
// whose password is "verysecure". The issuer is http://localhost:PORT/ (with
// the slash). Its login form (GET /login/username?authRequestID=…) posts
// username, password and the hidden id to /login/username.
const (
	ClientID     = "web"
	ClientSecret = "secret"
	Password     = "verysecure"
)

// User is one account of the provider, in the example server's users file
// format (USERS_FILE: a JSON object of users keyed by their ID).
type User struct {
	ID                string
	Username          string
	Password          string
	FirstName         string
	LastName          string
	Email             string
	EmailVerified     bool
	PreferredLanguage string
	IsAdmin           bool
}

// Options for Start.
type Options struct {
	// RedirectURIs are registered for every client (the example server
	// reads REDIRECT_URI for all of them).
	RedirectURIs []string
	// Users replaces the built-in demo users when set. Their IDs are the
	// subjects the provider issues.
	Users []User
	// Port to listen on; 0 picks a free one.
	Port int
	// NoWait returns before the provider serves (for a test of a client
	// that retries discovery); Wait then waits for it.
	NoWait bool
}

// Provider is a running example OpenID provider.
type Provider struct {
	// Issuer is the issuer URL, exactly as discovery states it.
	Issuer string
	logs   *syncBuffer
	done   <-chan struct{}
}

// Build builds the example OpenID provider if it is not built yet (once
// per version, on a fresh machine tens of seconds), so a test can do it
// before it starts timing something.
func Build(tb testing.TB) string {
	tb.Helper()
	return binary(tb, zitadelPkg, ZitadelVersion, "server", "zitadel-oidc-example-server")
}

// Start builds (once) and starts the example OpenID provider, and waits
// until its discovery document is served.
func Start(tb testing.TB, o Options) *Provider {
	tb.Helper()
	bin := Build(tb)
	port := o.Port
	if port == 0 {
		port = FreePort(tb)
	}
	env := []string{fmt.Sprintf("PORT=%d", port), "REDIRECT_URI=" + strings.Join(o.RedirectURIs, ",")}
	if o.Users != nil {
		users := map[string]User{}
		for _, u := range o.Users {
			if u.PreferredLanguage == "" {
				u.PreferredLanguage = "en"
			}
			users[u.ID] = u
		}
		b, err := json.Marshal(users)
		if err != nil {
			tb.Fatal(err)
		}
		path := filepath.Join(tb.TempDir(), "users.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			tb.Fatal(err)
		}
		env = append(env, "USERS_FILE="+path)
	}
	_, logs, done := run(tb, "OpenID provider", bin, nil, env)
	p := &Provider{Issuer: fmt.Sprintf("http://localhost:%d/", port), logs: logs, done: done}
	if !o.NoWait {
		p.Wait(tb)
	}
	return p
}

// Wait waits until the provider serves its discovery document, and fails tb
// with its output if it exits first.
func (p *Provider) Wait(tb testing.TB) {
	tb.Helper()
	testsupport.Poll(tb, 60*time.Second, func() error {
		select {
		case <-p.done:
			tb.Fatalf("oidcprovider: the OpenID provider exited:\n%s", p.logs.String())
		default:
		}
		resp, err := http.Get(p.Issuer + ".well-known/openid-configuration")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("discovery answered %s", resp.Status)
		}
		return nil
	})
}

// DemoUser is the example server's first built-in user.
func (p *Provider) DemoUser() User {
	return User{ID: "id1", Username: "test-user@localhost", Password: Password, Email: "test-user@zitadel.ch", EmailVerified: true}
}
