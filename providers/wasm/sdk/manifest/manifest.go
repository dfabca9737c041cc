// Package manifest parses and validates the manifest a provider module
// carries: who it is, which hosts it may call, which credentials the host
// injects toward which of them, its account settings, limits,
// capabilities and the provider's own deletion clocks. Validation is
// strict: anything the host does not understand is refused, and every
// error names the offending field.
//
// It lives in the SDK module so that an author's packer validates exactly
// as companion does at install, without depending on the server.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// ABIVersion is the newest module ABI this host implements. A module built
// for a newer ABI is refused; every older version stays supported.
const ABIVersion = 1

// MaxSize bounds the manifest JSON.
const MaxSize = 64 << 10

// Manifest is the parsed, validated manifest of one module.
type Manifest struct {
	Name        string              `json:"name"`
	Version     string              `json:"version"`
	ABIVersion  int                 `json:"abi_version"`
	Description string              `json:"description"`
	Upstreams   map[string]Upstream `json:"upstreams"`
	Credentials []Credential        `json:"credentials"`
	Config      []ConfigField       `json:"config"`
	// Options are the creation options the module takes (spec.options).
	// Absent: undeclared, and companion passes any option through; a list
	// (even empty) makes companion refuse others before creating.
	Options      []ConfigField `json:"options,omitempty"`
	Limits       Limits        `json:"limits"`
	Capabilities Capabilities  `json:"capabilities"`
	// Endpoint, when present, lets the module report its boxes'
	// agent-server URLs (op endpoint) and bounds where they may point.
	Endpoint *EndpointRule `json:"endpoint,omitempty"`
	// Clocks are the provider's own deletion clocks (clocks.go); absent
	// or empty means it deletes nothing on its own.
	Clocks []Clock `json:"clocks,omitempty"`
}

// Capabilities are the module's capability flags (ABI.md §8). The server
// converts them to core.Capabilities, which has the same fields: this
// package is part of the SDK module and must not import the server.
type Capabilities struct {
	List               bool `json:"list"`
	LastActivity       bool `json:"last_activity"`
	Suspend            bool `json:"suspend"`
	SuspendKeepsFiles  bool `json:"suspend_keeps_files"`
	SuspendKeepsMemory bool `json:"suspend_keeps_memory"`
	ResumeSameIdentity bool `json:"resume_same_identity"`
	Delete             bool `json:"delete"`
	NativeIdlePause    bool `json:"native_idle_pause"`
	NativePausedTTL    bool `json:"native_paused_ttl"`
}

// Upstream is one API the module may call, named by the module in each
// request. The host builds URLs from BaseURL; the guest never gives a URL.
type Upstream struct {
	BaseURL string `json:"base_url"`
	// Override names a config field an account may set to point this
	// upstream at another base URL (a self-hosted deployment, a test
	// server). Empty means the base URL is fixed.
	Override string `json:"override,omitempty"`
}

// Credential is one secret of an account, injected by the host into
// requests toward the upstreams it is bound to.
type Credential struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Header is the request header the credential goes into.
	Header string `json:"header"`
	// Format is the header value with {token} where the secret goes;
	// empty means "{token}".
	Format    string   `json:"format,omitempty"`
	Upstreams []string `json:"upstreams"`
}

// HeaderLine renders the injection rule as "Header: format".
func (c Credential) HeaderLine() string { return c.Header + ": " + c.Format }

// ConfigField is one non-secret account setting.
type ConfigField struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Example is a sample value, shown as a form's placeholder; optional
	// (added within ABI v1: a manifest without it is valid).
	Example  string `json:"example,omitempty"`
	Required bool   `json:"required,omitempty"`
}

// Limits bound what one module may use. Zero fields take the defaults.
type Limits struct {
	MemoryMiB       int   `json:"memory_mib,omitempty"`
	CallTimeoutMS   int   `json:"call_timeout_ms,omitempty"`
	ResponseBytes   int64 `json:"response_bytes,omitempty"`
	RequestsPerCall int   `json:"requests_per_call,omitempty"`
}

// Defaults, floors and ceilings of the limits.
const (
	DefaultMemoryMiB = 64
	MinMemoryMiB     = 1
	MaxMemoryMiB     = 512

	DefaultCallTimeoutMS = 30_000
	MinCallTimeoutMS     = 10
	MaxCallTimeoutMS     = 300_000

	DefaultResponseBytes = 4 << 20
	MinResponseBytes     = 1 << 10
	MaxResponseBytes     = 32 << 20

	DefaultRequestsPerCall = 32
	MinRequestsPerCall     = 1
	MaxRequestsPerCall     = 256
)

// CallTimeout returns the limit as a duration.
func (l Limits) CallTimeout() time.Duration {
	return time.Duration(l.CallTimeoutMS) * time.Millisecond
}

// MemoryPages returns the memory limit in 64 KiB wasm pages.
func (l Limits) MemoryPages() uint32 { return uint32(l.MemoryMiB) * 16 }

// Error is a validation failure of one field.
type Error struct {
	Field string // JSON path, e.g. "upstreams.api.base_url"; "" for the document
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return "manifest: " + e.Msg
	}
	return "manifest: " + e.Field + ": " + e.Msg
}

func fieldErr(field, format string, args ...any) *Error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// The patterns are compiled on first use, not at package init: bounded
// repeats make them costly to compile, and a host that imports this
// package pays init before it can serve, while manifests are read later.
var (
	ident        = lazyRegexp(`^[a-z][a-z0-9_]{0,31}$`)
	configName   = lazyRegexp(`^[a-z][a-z0-9_]{0,63}$`)
	semver       = lazyRegexp(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	headerToken  = lazyRegexp("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
	printableASC = lazyRegexp(`^[\x20-\x7e]*$`)
)

// isModuleName is ^[a-z][a-z0-9-]{0,30}[a-z0-9]$ written out: a host
// checks its built-in modules' names while it starts.
func isModuleName(s string) bool {
	if len(s) < 2 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i < len(s)-1
		if !ok {
			return false
		}
	}
	return true
}

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// Parse decodes and validates a manifest, filling in default limits.
func Parse(data []byte) (*Manifest, error) {
	if len(data) == 0 {
		return nil, &Error{Msg: "empty"}
	}
	if len(data) > MaxSize {
		return nil, &Error{Msg: fmt.Sprintf("larger than %d bytes", MaxSize)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Msg: "trailing data after the JSON object"}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		f := te.Field
		if f == "" {
			f = "(document)"
		}
		return fieldErr(f, "must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return &Error{Msg: fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return &Error{Field: strings.Trim(f, `"`), Msg: "unknown field"}
	}
	return &Error{Msg: "invalid JSON: " + err.Error()}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int64", "uint32":
		return "an integer"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return "a " + goKind
}

// Validate checks every field and fills default limits. It is what Parse
// runs; it is exported for manifests built in Go.
func (m *Manifest) Validate() error {
	if err := CheckName(m.Name); err != nil {
		return fieldErr("name", "%v", err)
	}
	if !semver().MatchString(m.Version) || len(m.Version) > 64 {
		return fieldErr("version", "must be a semantic version such as 1.2.0 (got %q)", m.Version)
	}
	switch {
	case m.ABIVersion == 0:
		return fieldErr("abi_version", "is required (this host implements ABI version %d)", ABIVersion)
	case m.ABIVersion < 0:
		return fieldErr("abi_version", "must be a positive integer")
	case m.ABIVersion > ABIVersion:
		return fieldErr("abi_version", "module needs ABI version %d but this companion implements up to %d; update companion", m.ABIVersion, ABIVersion)
	}
	if err := text("description", m.Description, true, 500); err != nil {
		return err
	}
	if err := m.validateConfig(); err != nil {
		return err
	}
	if err := m.validateUpstreams(); err != nil {
		return err
	}
	if err := m.validateCredentials(); err != nil {
		return err
	}
	if err := m.Limits.validate(); err != nil {
		return err
	}
	if err := m.validateEndpoint(); err != nil {
		return err
	}
	if err := validateCapabilities(m.Capabilities); err != nil {
		return err
	}
	return m.validateClocks()
}

func text(field, s string, required bool, max int) error {
	if required && strings.TrimSpace(s) == "" {
		return fieldErr(field, "is required")
	}
	if !utf8.ValidString(s) {
		return fieldErr(field, "is not valid UTF-8")
	}
	if utf8.RuneCountInString(s) > max {
		return fieldErr(field, "is longer than %d characters", max)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fieldErr(field, "contains control characters")
		}
	}
	return nil
}

func (m *Manifest) configField(name string) bool {
	for _, f := range m.Config {
		if f.Name == name {
			return true
		}
	}
	return false
}

func (m *Manifest) validateConfig() error {
	if err := validateFields("config", m.Config); err != nil {
		return err
	}
	return validateFields("options", m.Options)
}

func validateFields(field string, fields []ConfigField) error {
	if len(fields) > 32 {
		return fieldErr(field, "has more than 32 fields")
	}
	seen := map[string]bool{}
	for i, f := range fields {
		p := fmt.Sprintf("%s[%d]", field, i)
		if !configName().MatchString(f.Name) {
			return fieldErr(p+".name", "must be 1-64 characters of a-z, 0-9 and '_', starting with a letter (got %q)", f.Name)
		}
		if seen[f.Name] {
			return fieldErr(p+".name", "%q is declared twice", f.Name)
		}
		seen[f.Name] = true
		if err := text(p+".description", f.Description, true, 300); err != nil {
			return err
		}
		if err := text(p+".example", f.Example, false, 200); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manifest) validateUpstreams() error {
	if len(m.Upstreams) == 0 {
		return fieldErr("upstreams", "must declare at least one upstream")
	}
	if len(m.Upstreams) > 16 {
		return fieldErr("upstreams", "has more than 16 entries")
	}
	for _, name := range sortedKeys(m.Upstreams) {
		u := m.Upstreams[name]
		p := "upstreams." + name
		if !ident().MatchString(name) {
			return fieldErr(p, "name must be 1-32 characters of a-z, 0-9 and '_', starting with a letter")
		}
		if _, err := ParseBaseURL(u.BaseURL, false); err != nil {
			return fieldErr(p+".base_url", "%v", err)
		}
		if u.Override != "" && !m.configField(u.Override) {
			return fieldErr(p+".override", "names config field %q, which is not declared in config", u.Override)
		}
	}
	return nil
}

// ParseBaseURL checks a base URL: absolute, https (http too when
// allowHTTP), a host, no user info, query or fragment. It returns the URL
// with a lower-case host and no trailing slash on the path.
func ParseBaseURL(raw string, allowHTTP bool) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("is required")
	}
	if len(raw) > 2048 {
		return nil, errors.New("is longer than 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("is not a URL: %q", raw)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTP:
	case allowHTTP:
		return nil, fmt.Errorf("must be an http:// or https:// URL (got %q)", raw)
	default:
		return nil, fmt.Errorf("must be an https:// URL (got %q)", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("has no host (got %q)", raw)
	}
	if u.User != nil {
		return nil, errors.New("must not contain user info")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, errors.New("must not contain a query or fragment")
	}
	if port := u.Port(); port != "" {
		if n, err := net.LookupPort("tcp", port); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("has an invalid port %q", port)
		}
	}
	u.Host = strings.ToLower(u.Host)
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	return u, nil
}

// Origin returns scheme://host:port of u with the port made explicit; two
// URLs reach the same server exactly when their origins are equal.
func Origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// Forbidden credential headers: the transport owns them, or they would
// smuggle a second identity.
var hostOwnedHeaders = map[string]bool{
	"host": true, "content-length": true, "content-type": true, "transfer-encoding": true,
	"connection": true, "keep-alive": true, "upgrade": true, "te": true, "trailer": true,
	"cookie": true, "set-cookie": true, "proxy-authorization": true, "proxy-connection": true,
}

func (m *Manifest) validateCredentials() error {
	if len(m.Credentials) > 8 {
		return fieldErr("credentials", "has more than 8 entries")
	}
	seen := map[string]bool{}
	headerOn := map[string]string{} // upstream+"\x00"+header -> credential
	for i := range m.Credentials {
		c := &m.Credentials[i]
		p := fmt.Sprintf("credentials[%d]", i)
		if !ident().MatchString(c.Name) {
			return fieldErr(p+".name", "must be 1-32 characters of a-z, 0-9 and '_', starting with a letter (got %q)", c.Name)
		}
		if seen[c.Name] {
			return fieldErr(p+".name", "%q is declared twice", c.Name)
		}
		seen[c.Name] = true
		if m.configField(c.Name) {
			return fieldErr(p+".name", "%q is also a config field; secrets and settings need distinct names", c.Name)
		}
		if err := text(p+".description", c.Description, true, 300); err != nil {
			return err
		}
		if !headerToken().MatchString(c.Header) {
			return fieldErr(p+".header", "must be an HTTP header name (got %q)", c.Header)
		}
		lh := strings.ToLower(c.Header)
		if hostOwnedHeaders[lh] || strings.HasPrefix(lh, "proxy-") {
			return fieldErr(p+".header", "%q cannot carry a credential", c.Header)
		}
		if c.Format == "" {
			c.Format = "{token}"
		}
		if len(c.Format) > 256 || !printableASC().MatchString(c.Format) {
			return fieldErr(p+".format", "must be at most 256 printable ASCII characters")
		}
		if strings.Count(c.Format, "{token}") != 1 {
			return fieldErr(p+".format", "must contain {token} exactly once (got %q)", c.Format)
		}
		if len(c.Upstreams) == 0 {
			return fieldErr(p+".upstreams", "must name at least one upstream the credential is sent to")
		}
		bound := map[string]bool{}
		for j, up := range c.Upstreams {
			if _, ok := m.Upstreams[up]; !ok {
				return fieldErr(fmt.Sprintf("%s.upstreams[%d]", p, j), "names upstream %q, which is not declared in upstreams", up)
			}
			if bound[up] {
				return fieldErr(fmt.Sprintf("%s.upstreams[%d]", p, j), "names upstream %q twice", up)
			}
			bound[up] = true
			k := up + "\x00" + lh
			if other, dup := headerOn[k]; dup {
				return fieldErr(p+".header", "credentials %q and %q would both set %s toward upstream %q", other, c.Name, c.Header, up)
			}
			headerOn[k] = c.Name
		}
	}
	return nil
}

func (l *Limits) validate() error {
	check := func(field string, v *int, def, lo, hi int) error {
		switch {
		case *v == 0:
			*v = def
		case *v < lo:
			return fieldErr("limits."+field, "%d is below the minimum %d", *v, lo)
		case *v > hi:
			return fieldErr("limits."+field, "%d is above the ceiling %d", *v, hi)
		}
		return nil
	}
	if err := check("memory_mib", &l.MemoryMiB, DefaultMemoryMiB, MinMemoryMiB, MaxMemoryMiB); err != nil {
		return err
	}
	if err := check("call_timeout_ms", &l.CallTimeoutMS, DefaultCallTimeoutMS, MinCallTimeoutMS, MaxCallTimeoutMS); err != nil {
		return err
	}
	if err := check("requests_per_call", &l.RequestsPerCall, DefaultRequestsPerCall, MinRequestsPerCall, MaxRequestsPerCall); err != nil {
		return err
	}
	switch {
	case l.ResponseBytes == 0:
		l.ResponseBytes = DefaultResponseBytes
	case l.ResponseBytes < MinResponseBytes:
		return fieldErr("limits.response_bytes", "%d is below the minimum %d", l.ResponseBytes, MinResponseBytes)
	case l.ResponseBytes > MaxResponseBytes:
		return fieldErr("limits.response_bytes", "%d is above the ceiling %d", l.ResponseBytes, MaxResponseBytes)
	}
	return nil
}

func validateCapabilities(c Capabilities) error {
	if c.LastActivity && !c.List {
		return fieldErr("capabilities.last_activity", "needs capabilities.list")
	}
	if !c.Suspend {
		switch {
		case c.SuspendKeepsFiles:
			return fieldErr("capabilities.suspend_keeps_files", "needs capabilities.suspend")
		case c.SuspendKeepsMemory:
			return fieldErr("capabilities.suspend_keeps_memory", "needs capabilities.suspend")
		case c.ResumeSameIdentity:
			return fieldErr("capabilities.resume_same_identity", "needs capabilities.suspend")
		}
	}
	return nil
}

// Hosts returns the origins the module may reach when no account overrides
// anything, sorted and deduplicated.
func (m *Manifest) Hosts() []string {
	set := map[string]bool{}
	for _, u := range m.Upstreams {
		if pu, err := ParseBaseURL(u.BaseURL, false); err == nil {
			set[Origin(pu)] = true
		}
	}
	out := make([]string, 0, len(set))
	for h := range set {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// UpstreamNames returns the upstream names, sorted.
func (m *Manifest) UpstreamNames() []string { return sortedKeys(m.Upstreams) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CheckName reports whether name is a valid module name.
func CheckName(name string) error {
	if !isModuleName(name) {
		return fmt.Errorf("must be 2-32 characters of a-z, 0-9 and '-', starting with a letter (got %q)", name)
	}
	return nil
}
