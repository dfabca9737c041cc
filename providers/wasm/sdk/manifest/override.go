package manifest

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// ParseOverride checks an account's base URL override of an upstream. It
// must be https://, except that a loopback host (localhost, 127.0.0.0/8,
// ::1) may use plain http://: the credential the host injects would
// otherwise cross the network unencrypted.
func ParseOverride(raw string) (*url.URL, error) {
	u, err := ParseBaseURL(raw, true)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "http" && !LoopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("uses plain http:// toward %s, which is not a loopback host; use https:// (plain http is allowed only for localhost, 127.0.0.0/8 and ::1)", u.Hostname())
	}
	return u, nil
}

// LoopbackHost reports whether host (a URL's Hostname) names the loopback
// interface: "localhost", a name under .localhost (RFC 6761), or a
// loopback IP literal. The host dials such names only to loopback
// addresses (see hostcall), so a hosts file cannot send them elsewhere.
func LoopbackHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// CheckAccountConfig checks the upstream overrides an account sets, so a
// bad one is refused when the account is added rather than at its first
// request. Errors name the config field.
func (m *Manifest) CheckAccountConfig(cfg map[string]string) error {
	for _, name := range sortedKeys(m.Upstreams) {
		field := m.Upstreams[name].Override
		if field == "" {
			continue
		}
		raw := strings.TrimSpace(cfg[field])
		if raw == "" {
			continue
		}
		if _, err := ParseOverride(raw); err != nil {
			return fmt.Errorf("config field %s %v", field, err)
		}
	}
	if m.Endpoint != nil && m.Endpoint.Override != "" {
		if v := strings.TrimSpace(cfg[m.Endpoint.Override]); v != "" {
			if err := CheckEndpointOverride(v); err != nil {
				return fmt.Errorf("config field %s %v", m.Endpoint.Override, err)
			}
		}
	}
	return nil
}
