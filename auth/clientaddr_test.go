package auth_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/canvasapp/companion/auth"
)

// The client address is the TCP peer unless the peer is a trusted
// ingress; then it is the right-most forwarded hop that is not trusted,
// so whatever a client writes into the header itself is never believed.
func TestClientAddr(t *testing.T) {
	trusted, err := auth.ParseTrusted("10.0.0.0/24, 127.0.0.1/32, fd00:1::/64")
	if err != nil {
		t.Fatal(err)
	}
	xff := auth.Ingress{Trusted: trusted}
	fwd := auth.Ingress{Trusted: trusted, Header: auth.HeaderForwarded}
	for _, c := range []struct {
		name    string
		in      auth.Ingress
		peer    string
		headers map[string][]string
		want    string
	}{
		{"untrusted peer, no header", xff, "203.0.113.7:5000", nil, "203.0.113.7"},
		{"spoofed header from an untrusted peer", xff, "203.0.113.7:5000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "203.0.113.7"},
		{"nobody trusted: the header is never read", auth.Ingress{}, "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "127.0.0.1"},
		{"one trusted hop", xff, "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"a client's made-up hops left of the real one", xff, "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"1.1.1.1, 2.2.2.2, 198.51.100.1"}}, "198.51.100.1"},
		{"several trusted hops, several header lines", xff, "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1", "10.0.0.9,10.0.0.3"}}, "198.51.100.1"},
		{"every hop trusted: the left-most", xff, "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"10.0.0.4, 10.0.0.3"}}, "10.0.0.4"},
		{"trusted peer without the header", xff, "10.0.0.2:80", nil, "10.0.0.2"},
		{"a deciding hop that is not an address", xff, "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"1.1.1.1, unknown"}}, "127.0.0.1"},
		{"hop with a port", xff, "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1:4711"}}, "198.51.100.1"},
		{"IPv6 peer and client", xff, "[fd00:1::5]:443",
			map[string][]string{"X-Forwarded-For": {"2001:db8::1"}}, "2001:db8::1"},
		{"IPv6 client with a port", xff, "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"[2001:db8::1]:4711"}}, "2001:db8::1"},
		{"IPv4-mapped peer", xff, "[::ffff:127.0.0.1]:5000",
			map[string][]string{"X-Forwarded-For": {"::ffff:198.51.100.1"}}, "198.51.100.1"},
		{"untrusted IPv6 peer", xff, "[2001:db8::9]:5000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "2001:db8::9"},
		{"Forwarded when configured", fwd, "127.0.0.1:5000",
			map[string][]string{"Forwarded": {`for=1.1.1.1, for="[2001:db8::1]:4711";proto=https, for=10.0.0.7;by=10.0.0.1`}}, "2001:db8::1"},
		{"X-Forwarded-For ignored when Forwarded is configured", fwd, "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "127.0.0.1"},
		{"Forwarded ignored when X-Forwarded-For is configured", xff, "127.0.0.1:5000",
			map[string][]string{"Forwarded": {"for=198.51.100.1"}, "X-Forwarded-For": {"198.51.100.2"}}, "198.51.100.2"},
		{"Forwarded with an obfuscated hop", fwd, "127.0.0.1:5000",
			map[string][]string{"Forwarded": {"for=1.1.1.1, for=_hidden"}}, "127.0.0.1"},
	} {
		h := http.Header{}
		for k, vs := range c.headers {
			for _, v := range vs {
				h.Add(k, v)
			}
		}
		if got := c.in.ClientAddr(c.peer, h); got != c.want {
			t.Errorf("%s: peer %s, %v: %q, want %q", c.name, c.peer, c.headers, got, c.want)
		}
	}
}

func TestParseTrusted(t *testing.T) {
	got, err := auth.ParseTrusted("10.1.2.3/8, 192.0.2.1, fd00::1/64,::ffff:10.0.0.1/128")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32"),
		netip.MustParsePrefix("fd00::/64"), netip.MustParsePrefix("10.0.0.1/32")}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: %v, want %v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"", "10.0.0/8", "example.com", "10.0.0.1/33"} {
		if _, err := auth.ParseTrusted(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
