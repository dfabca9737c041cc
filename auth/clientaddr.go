package auth

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Forwarding headers an ingress may name the client in (Ingress.Header).
const (
	HeaderXForwardedFor = "X-Forwarded-For"
	HeaderForwarded     = "Forwarded" // RFC 7239
)

// Ingress says which TCP peers are trusted ingresses (reverse proxies,
// load balancers) and which header they name the client in. The zero
// value trusts nobody: the client is always the TCP peer.
type Ingress struct {
	// Trusted are the ingresses' address ranges (--trusted-proxy).
	Trusted []netip.Prefix
	// Header is HeaderXForwardedFor ("" means it) or HeaderForwarded.
	// Only this one header is read: an ingress passes the other on as
	// the client sent it, so reading both would let a client choose its
	// address.
	Header string
}

// ParseTrusted parses a comma-separated list of CIDRs ("10.0.0.5/32,
// fd00::/64"); a bare address means just that address.
func ParseTrusted(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, c := range strings.Split(list, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			a, aerr := netip.ParseAddr(c)
			if aerr != nil {
				return nil, fmt.Errorf("%q: %w (want CIDRs such as 10.0.0.5/32,fd00::/64)", c, err)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CIDR given (want CIDRs such as 10.0.0.5/32,fd00::/64)")
	}
	return out, nil
}

// Trusts reports whether a is inside a trusted range.
func (in Ingress) Trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range in.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// PeerTrusted reports whether remoteAddr (http.Request.RemoteAddr, the
// TCP peer) is a trusted ingress.
func (in Ingress) PeerTrusted(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	return err == nil && in.Trusts(ap.Addr())
}

// ClientAddr is the address a request came from, for the failed-login
// limits and the logs. It is the TCP peer (remoteAddr), unless the peer
// is a trusted ingress: then it is the right-most address of the
// forwarding header that is not itself trusted, the nearest hop no
// trusted party vouches for. Everything left of that hop may be made up
// by the client, so it is never read; a client cannot pick its address.
// When every hop is trusted the left-most one is the client; when the
// header is missing, or a hop that would decide is not an address, it is
// the peer. IPv4-mapped IPv6 addresses are given as IPv4.
func (in Ingress) ClientAddr(remoteAddr string, h http.Header) string {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	peer := ap.Addr().Unmap()
	if !in.Trusts(peer) {
		return peer.String()
	}
	var hops []string
	if in.Header == HeaderForwarded {
		hops = forwardedFor(h.Values(HeaderForwarded))
	} else {
		for _, v := range h.Values(HeaderXForwardedFor) {
			hops = append(hops, strings.Split(v, ",")...)
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			return peer.String()
		}
		if !in.Trusts(a) || i == 0 {
			return a.String()
		}
	}
	return peer.String()
}

// parseHop reads one forwarded hop: an address, optionally with a port
// ("192.0.2.1:4711", "[2001:db8::1]:4711") or in brackets.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Zone() == "" {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// forwardedFor lists the for= values of Forwarded header lines in order
// (RFC 7239: elements separated by commas, pairs by semicolons, values
// possibly quoted). An element without for= is a hop whose address is
// unknown ("").
func forwardedFor(lines []string) []string {
	var hops []string
	for _, line := range lines {
		for _, elem := range strings.Split(line, ",") {
			hop := ""
			for _, pair := range strings.Split(elem, ";") {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					hop = strings.Trim(v, `"`)
				}
			}
			hops = append(hops, hop)
		}
	}
	return hops
}
