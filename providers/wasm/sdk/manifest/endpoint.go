package manifest

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// EndpointRule says where the agent-server URLs a module's endpoint op
// returns may point (ABI.md §5a). A URL a module returns is untrusted: the
// host uses it only when its host matches one of the patterns, and attaches
// the named credentials itself, so the module never holds them.
type EndpointRule struct {
	// Hosts are exact host names or "*.domain" (any name under domain, at
	// any depth). At least one; ports are not part of a pattern.
	Hosts []string `json:"hosts"`
	// Override names a config field an account may set to one pattern that
	// replaces Hosts (a self-hosted deployment, an emulator). Plain http is
	// accepted only toward a loopback pattern such as "*.localhost".
	Override string `json:"override,omitempty"`
	// Credentials are the account credentials the host adds to requests
	// toward a matching host, each in its own header and format.
	Credentials []string `json:"credentials,omitempty"`
	// SessionKey says who makes the agent-server's session key:
	// SessionKeyCompanion (the default, "" too) when the box takes the key
	// companion generates (spec.agent_key), SessionKeyProvider when the
	// provider issues its own and may replace it (the OpenHands
	// runtime-api makes a new one at every resume): the key is then the
	// one get reports for the box (Box.Key), read afresh each time.
	SessionKey string `json:"session_key,omitempty"`
}

// Who makes a box's agent-server session key (EndpointRule.SessionKey).
const (
	SessionKeyCompanion = "companion"
	SessionKeyProvider  = "provider"
)

// ErrEndpointHost is wrapped by CheckEndpointURL when a URL's host is not
// one the manifest declares.
var ErrEndpointHost = errors.New("agent-server URL host is not declared in the module's manifest (endpoint.hosts)")

var hostLabel = lazyRegexp(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// checkHostPattern validates one pattern: a DNS name, optionally "*."
// followed by a name with at least one dot or "localhost", or an IP literal.
func checkHostPattern(p string) error {
	if p == "" {
		return errors.New("is empty")
	}
	if p != strings.ToLower(p) {
		return fmt.Errorf("must be lower case (got %q)", p)
	}
	rest, wild := strings.CutPrefix(p, "*.")
	if strings.Contains(rest, "*") {
		return fmt.Errorf("may use '*' only as a leading \"*.\" label (got %q)", p)
	}
	if wild && !strings.Contains(rest, ".") && rest != "localhost" {
		return fmt.Errorf("\"*.%s\" would match a whole top-level domain", rest)
	}
	if len(rest) > 253 {
		return errors.New("is longer than 253 characters")
	}
	for _, l := range strings.Split(rest, ".") {
		if !hostLabel().MatchString(l) {
			return fmt.Errorf("is not a host name or \"*.domain\" pattern (got %q)", p)
		}
	}
	return nil
}

// hostMatches reports whether host (lower case, no port) matches pattern.
func hostMatches(pattern, host string) bool {
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+rest)
	}
	return host == pattern
}

func (m *Manifest) validateEndpoint() error {
	r := m.Endpoint
	if r == nil {
		return nil
	}
	if len(r.Hosts) == 0 || len(r.Hosts) > 16 {
		return fieldErr("endpoint.hosts", "must list 1-16 host patterns")
	}
	for i, p := range r.Hosts {
		if err := checkHostPattern(p); err != nil {
			return fieldErr(fmt.Sprintf("endpoint.hosts[%d]", i), "%v", err)
		}
		if LoopbackHost(strings.TrimPrefix(p, "*.")) {
			return fieldErr(fmt.Sprintf("endpoint.hosts[%d]", i), "names a loopback host; only an account's override (endpoint.override) may point there")
		}
	}
	if r.Override != "" && !m.configField(r.Override) {
		return fieldErr("endpoint.override", "names config field %q, which is not declared in config", r.Override)
	}
	if r.SessionKey != "" && r.SessionKey != SessionKeyCompanion && r.SessionKey != SessionKeyProvider {
		return fieldErr("endpoint.session_key", "must be %q (the box takes companion's key) or %q (the provider issues it; get reports it) (got %q)", SessionKeyCompanion, SessionKeyProvider, r.SessionKey)
	}
	seen := map[string]bool{}
	for i, c := range r.Credentials {
		if m.credential(c) == nil {
			return fieldErr(fmt.Sprintf("endpoint.credentials[%d]", i), "names credential %q, which is not declared in credentials", c)
		}
		if seen[c] {
			return fieldErr(fmt.Sprintf("endpoint.credentials[%d]", i), "%q is listed twice", c)
		}
		seen[c] = true
	}
	return nil
}

func (m *Manifest) credential(name string) *Credential {
	for i := range m.Credentials {
		if m.Credentials[i].Name == name {
			return &m.Credentials[i]
		}
	}
	return nil
}

// EndpointCredentials returns the credentials the host attaches toward an
// endpoint host, in manifest order.
func (m *Manifest) EndpointCredentials() []Credential {
	if m.Endpoint == nil {
		return nil
	}
	var out []Credential
	for _, n := range m.Endpoint.Credentials {
		if c := m.credential(n); c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// EndpointHosts returns the patterns in force for an account: its override
// when set, else the manifest's.
func (m *Manifest) EndpointHosts(cfg map[string]string) []string {
	if m.Endpoint == nil {
		return nil
	}
	if f := m.Endpoint.Override; f != "" {
		if v := strings.ToLower(strings.TrimSpace(cfg[f])); v != "" {
			return []string{v}
		}
	}
	return m.Endpoint.Hosts
}

// CheckEndpointOverride checks an account's endpoint override value.
func CheckEndpointOverride(v string) error {
	return checkHostPattern(strings.ToLower(strings.TrimSpace(v)))
}

// CheckEndpointURL checks an agent-server URL a module returned for an
// account with config cfg: http(s) with a host, no user info, https unless
// the host is loopback, and a host matching the patterns in force. A host
// outside them is an error wrapping ErrEndpointHost.
func (m *Manifest) CheckEndpointURL(raw string, cfg map[string]string) (*url.URL, error) {
	if m.Endpoint == nil {
		return nil, fmt.Errorf("%w: the manifest declares no endpoint", ErrEndpointHost)
	}
	u, err := ParseBaseURL(raw, true)
	if err != nil {
		return nil, fmt.Errorf("agent-server URL %v", err)
	}
	host := strings.TrimSuffix(u.Hostname(), ".")
	if u.Scheme == "http" && !LoopbackHost(host) {
		return nil, fmt.Errorf("agent-server URL uses plain http:// toward %s, which is not a loopback host", host)
	}
	for _, p := range m.EndpointHosts(cfg) {
		if hostMatches(p, host) {
			return u, nil
		}
	}
	return nil, fmt.Errorf("%w: %q matches none of %s", ErrEndpointHost, host, strings.Join(m.EndpointHosts(cfg), ", "))
}
