package wasm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
)

// Summary is what a person is shown before trusting a module: who it is,
// which hosts it will call, which credential goes to which host, and the
// SHA-256 that gets pinned.
type Summary struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	ABIVersion  int    `json:"abi_version"`
	Description string `json:"description"`
	SHA256      string `json:"sha256"`
	// Builtin is true for first-party modules embedded in the binary.
	Builtin bool `json:"builtin"`
	// Hosts are the origins (scheme://host:port) the module may call
	// unless an account overrides an upstream.
	Hosts        []string            `json:"hosts"`
	Upstreams    []UpstreamSummary   `json:"upstreams"`
	Credentials  []CredentialSummary `json:"credentials"`
	Config       []core.ConfigField  `json:"config"`
	Capabilities core.Capabilities   `json:"capabilities"`
	Limits       Limits              `json:"limits"`
	// Endpoint says where the agent-server URLs the module reports may
	// point, and which credentials the host adds toward them; null when
	// the module reports none.
	Endpoint *EndpointSummary `json:"endpoint"`
	// Clocks are the provider's own deletion clocks, as the manifest
	// declares them; [] when it declares none.
	Clocks []ClockSummary `json:"clocks"`
}

// ClockSummary is one deletion clock in the API's units (seconds), the
// form GET /v1/providers uses too (ABI.md, "Deletion clocks").
type ClockSummary struct {
	Name         string `json:"name"`
	Starts       string `json:"starts"`
	AfterSeconds int64  `json:"after_seconds"`
	Loses        string `json:"loses"`
	Setting      bool   `json:"setting"`
	Note         string `json:"note"`
}

// EndpointSummary is the module's endpoint rule as shown at install.
type EndpointSummary struct {
	Hosts         []string `json:"hosts"`
	OverrideField string   `json:"override_field,omitempty"`
	Credentials   []string `json:"credentials"`
	// SessionKey is "provider" when the provider issues the agent-server
	// keys itself (manifest endpoint.session_key); empty otherwise.
	SessionKey string `json:"session_key,omitempty"`
}

// UpstreamSummary is one API the module calls.
type UpstreamSummary struct {
	Name    string `json:"name"`
	BaseURL string `json:"base_url"`
	// OverrideField is the account setting that may point the upstream
	// elsewhere; empty if it is fixed.
	OverrideField string `json:"override_field,omitempty"`
}

// CredentialSummary says where one credential is sent.
type CredentialSummary struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Header is the injection rule, e.g. "Authorization: Bearer {token}".
	Header string `json:"header"`
	// Hosts are the origins the credential is sent to (plus an account's
	// own override of a bound upstream, named in OverrideFields).
	Hosts          []string `json:"hosts"`
	Upstreams      []string `json:"upstreams"`
	OverrideFields []string `json:"override_fields,omitempty"`
}

// Limits are the module's effective limits (defaults filled in). Like
// every duration in the HTTP API (ui-bridge/API.md) the call timeout is in
// seconds; it may have a fraction because the manifest sets it in
// milliseconds (limits.call_timeout_ms).
type Limits struct {
	MemoryMiB          int     `json:"memory_mib"`
	CallTimeoutSeconds float64 `json:"call_timeout_seconds"`
	ResponseBytes      int64   `json:"response_bytes"`
	RequestsPerCall    int     `json:"requests_per_call"`
}

// CallTimeout returns the call timeout as a duration.
func (l Limits) CallTimeout() time.Duration {
	return time.Duration(l.CallTimeoutSeconds * float64(time.Second)).Round(time.Millisecond)
}

func summarize(m *manifest.Manifest, sha string, builtin bool) Summary {
	s := Summary{
		Name:         m.Name,
		Version:      m.Version,
		ABIVersion:   m.ABIVersion,
		Description:  m.Description,
		SHA256:       sha,
		Builtin:      builtin,
		Hosts:        m.Hosts(),
		Upstreams:    []UpstreamSummary{},
		Credentials:  []CredentialSummary{},
		Config:       providerInfo(m).Config,
		Capabilities: core.Capabilities(m.Capabilities),
		Limits: Limits{
			MemoryMiB:          m.Limits.MemoryMiB,
			CallTimeoutSeconds: float64(m.Limits.CallTimeoutMS) / 1000,
			ResponseBytes:      m.Limits.ResponseBytes,
			RequestsPerCall:    m.Limits.RequestsPerCall,
		},
	}
	s.Clocks = make([]ClockSummary, 0, len(m.Clocks))
	for _, c := range m.Clocks {
		s.Clocks = append(s.Clocks, ClockSummary{Name: c.Name, Starts: c.Starts, AfterSeconds: c.AfterSeconds, Loses: c.Loses, Setting: c.Setting, Note: c.Note})
	}
	for _, name := range m.UpstreamNames() {
		u := m.Upstreams[name]
		s.Upstreams = append(s.Upstreams, UpstreamSummary{Name: name, BaseURL: u.BaseURL, OverrideField: u.Override})
	}
	for _, c := range m.Credentials {
		cs := CredentialSummary{Name: c.Name, Description: c.Description, Header: c.HeaderLine(), Upstreams: c.Upstreams}
		seen := map[string]bool{}
		for _, up := range c.Upstreams {
			pu, _ := manifest.ParseBaseURL(m.Upstreams[up].BaseURL, false)
			if o := manifest.Origin(pu); !seen[o] {
				seen[o] = true
				cs.Hosts = append(cs.Hosts, o)
			}
			if f := m.Upstreams[up].Override; f != "" {
				cs.OverrideFields = append(cs.OverrideFields, f)
			}
		}
		s.Credentials = append(s.Credentials, cs)
	}
	if r := m.Endpoint; r != nil {
		s.Endpoint = &EndpointSummary{Hosts: r.Hosts, OverrideField: r.Override, Credentials: append([]string{}, r.Credentials...)}
		if r.SessionKey == manifest.SessionKeyProvider {
			s.Endpoint.SessionKey = r.SessionKey
		}
	}
	return s
}

// String renders the summary for a terminal prompt.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (module ABI v%d)\n  %s\n  sha256 %s\n", s.Name, s.Version, s.ABIVersion, s.Description, s.SHA256)
	b.WriteString("  Calls:\n")
	for _, u := range s.Upstreams {
		fmt.Fprintf(&b, "    %s  (upstream %q", u.BaseURL, u.Name)
		if u.OverrideField != "" {
			fmt.Fprintf(&b, "; an account may point it elsewhere with the setting %q", u.OverrideField)
		}
		b.WriteString(")\n")
	}
	if len(s.Credentials) == 0 {
		b.WriteString("  Sends no credentials.\n")
	}
	for _, c := range s.Credentials {
		fmt.Fprintf(&b, "  Sends credential %q as %q to %s only", c.Name, c.Header, strings.Join(c.Hosts, ", "))
		if len(c.OverrideFields) > 0 {
			fmt.Fprintf(&b, " (or to the account's own %s)", strings.Join(c.OverrideFields, ", "))
		}
		b.WriteString("\n")
	}
	if len(s.Config) > 0 {
		b.WriteString("  Account settings:\n")
	}
	for _, f := range s.Config {
		fmt.Fprintf(&b, "    %s: %s", f.Name, f.Description)
		if f.Example != "" {
			fmt.Fprintf(&b, " (example: %s)", f.Example)
		}
		if f.Required {
			b.WriteString(" [required]")
		}
		b.WriteString("\n")
	}
	if e := s.Endpoint; e != nil {
		fmt.Fprintf(&b, "  Reports agent-server URLs under %s only", strings.Join(e.Hosts, ", "))
		if e.OverrideField != "" {
			fmt.Fprintf(&b, " (or the account's own %s)", e.OverrideField)
		}
		if len(e.Credentials) > 0 {
			fmt.Fprintf(&b, "; sends credential %s there", strings.Join(e.Credentials, ", "))
		}
		if e.SessionKey == manifest.SessionKeyProvider {
			b.WriteString("; the provider issues the agent-server keys (they change on resume)")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "  Limits: %d MiB memory, %s per call, %d response bytes, %d requests per call\n",
		s.Limits.MemoryMiB, s.Limits.CallTimeout(), s.Limits.ResponseBytes, s.Limits.RequestsPerCall)
	if len(s.Clocks) == 0 {
		b.WriteString("  Deletion clocks: none (the provider deletes nothing on its own)\n")
	} else {
		b.WriteString("  Deletion clocks (the provider deletes on its own; companion exports first):\n")
	}
	for _, c := range s.Clocks {
		fmt.Fprintf(&b, "    %s: %s\n", c.Name, c.Words())
		if c.Note != "" {
			fmt.Fprintf(&b, "      %s\n", c.Note)
		}
	}
	return b.String()
}

// Words says what the clock does, for people: "deletes the box 1 day
// after it stops", "may destroy an idle box after a period it does not
// publish", "deletes the box the paused TTL after it stops, when asked at
// create". The page (ui-bridge/web/format.js clockWords) says the same.
func (c ClockSummary) Words() string {
	files := c.Loses == manifest.ClockLosesFiles
	idle := c.Starts == manifest.ClockIdle
	if c.AfterSeconds == 0 && !c.Setting {
		box := "a stopped box"
		if idle {
			box = "an idle box"
		}
		if files {
			return "may wipe the files of " + box + " after a period it does not publish"
		}
		return "may destroy " + box + " after a period it does not publish"
	}
	what := "deletes the box"
	if files {
		what = "wipes the box's files"
	}
	when := "after it stops"
	switch {
	case idle:
		when = "after its last activity"
	case c.Starts == "running": // core.ClockStartsRunning (built-in adapters only)
		when = "after it was made, while it runs"
	}
	if c.Setting {
		return what + " the paused TTL " + when + ", when asked at create"
	}
	return what + " " + span(c.AfterSeconds) + " " + when
}

// span says a whole number of seconds in its largest exact unit: "30
// days", "1 hour", "90 seconds".
func span(s int64) string {
	for _, u := range []struct {
		n    int64
		name string
	}{{86400, "day"}, {3600, "hour"}, {60, "minute"}, {1, "second"}} {
		if s%u.n == 0 {
			n := s / u.n
			if n == 1 {
				return "1 " + u.name
			}
			return fmt.Sprintf("%d %ss", n, u.name)
		}
	}
	return ""
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// hashFile is the SHA-256 of a lazily loaded module, streamed from its
// file rather than held; "" when it cannot be read (its load then fails
// with the reason).
func (a *Adapter) hashFile() string {
	f, err := a.open()
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
