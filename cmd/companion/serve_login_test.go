package main

import (
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/canvasapp/companion/auth"
)

// --trusted-proxy works with every sign-in method (the login limits need
// the client's address behind an ingress whatever the method), stays
// required by --auth proxy, and is refused where nothing would read it.
func TestServeTrustedProxyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" means accepted
	}{
		{[]string{"--auth", "local", "--trusted-proxy", "127.0.0.1/32"}, ""},
		{[]string{"--auth", "local", "--trusted-proxy", "10.0.0.0/8, fd00::/64", "--forwarded-header", "forwarded"}, ""},
		{[]string{"--auth", "proxy", "--trusted-proxy", "10.0.0.5"}, ""},
		{[]string{"--auth", "proxy"}, "--auth proxy needs --trusted-proxy"},
		{[]string{"--trusted-proxy", "127.0.0.1/32"}, "add --auth local, oidc or proxy"},
		{[]string{"--auth", "local", "--trusted-proxy", "10.0.0/8"}, "want CIDRs such as"},
		{[]string{"--auth", "local", "--trusted-proxy", "127.0.0.1/32", "--forwarded-header", "X-Real-IP"}, "want X-Forwarded-For or Forwarded"},
	} {
		f, err := parseServerFlags(modeServe, tc.args, io.Discard)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		case tc.want == "" && len(f.login.ingress.Trusted) == 0:
			t.Errorf("%v: no trusted ingress", tc.args)
		}
	}
	f, err := parseServerFlags(modeServe, []string{"--auth", "local", "--trusted-proxy", "10.1.2.3/8,fd00::1/64", "--forwarded-header", "forwarded"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Ingress{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/64")}, Header: auth.HeaderForwarded}
	if got := f.login.ingress; len(got.Trusted) != 2 || got.Trusted[0] != want.Trusted[0] || got.Trusted[1] != want.Trusted[1] || got.Header != want.Header {
		t.Fatalf("ingress %+v, want %+v", got, want)
	}
}
