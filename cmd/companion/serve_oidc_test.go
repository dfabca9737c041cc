package main

import (
	"io"
	"strings"
	"testing"

	"github.com/canvasapp/companion/auth/oidclogin"
)

// The --auth oidc flags are checked before anything starts, each problem
// named with the flag that fixes it.
func TestServeOIDCFlags(t *testing.T) {
	base := []string{"--oidc-issuer", "https://id.example.com", "--oidc-client-id", "companion", "--oidc-client-secret-file", "/etc/secret"}
	for _, tc := range []struct {
		args []string
		want string // "" means accepted
	}{
		{append([]string{"--auth", "oidc", "--public-url", "https://canvas.example.com/api/companion"}, base...), ""},
		{append([]string{"--auth", "local,oidc,proxy", "--trusted-proxy", "10.0.0.1/32", "--public-url", "https://canvas.example.com"}, base...), ""},
		{append([]string{"--auth", "oidc"}, base...), "--auth oidc needs --public-url"},
		{[]string{"--auth", "oidc", "--public-url", "https://canvas.example.com"}, "--oidc-issuer URL, --oidc-client-id"},
		{append([]string{"--auth", "local"}, base...), "only used with --auth oidc"},
		{[]string{"--auth", "saml"}, "want local, oidc, proxy"},
	} {
		f, err := parseServerFlags(modeServe, tc.args, io.Discard)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		case tc.want == "" && (!f.login.oidc || !f.login.enabled()):
			t.Errorf("%v: oidc not enabled", tc.args)
		}
	}
}

func TestOIDCDisplayName(t *testing.T) {
	for _, tc := range []struct {
		id   oidclogin.Identity
		want string
	}{
		{oidclogin.Identity{Subject: "s1", Email: "a@example.com", EmailVerified: true, Name: "A"}, "a@example.com"},
		// An unverified address is anyone's claim: not a name.
		{oidclogin.Identity{Subject: "s1", Email: "a@example.com", Name: "A"}, "A"},
		{oidclogin.Identity{Subject: "s1", Email: "a@example.com"}, "s1"},
		{oidclogin.Identity{Subject: "s1", Name: "A"}, "A"},
		{oidclogin.Identity{Subject: "s1"}, "s1"},
	} {
		if got := oidcDisplayName(tc.id); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.id, got, tc.want)
		}
	}
}
