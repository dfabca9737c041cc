// Package hostcall implements the companion.http_request host function: the
// only way a module reaches the network. The module names a declared
// upstream; the host builds the URL, injects credentials itself, checks
// every redirect hop and every dialed address, and caps sizes and counts.
// A module never sees a credential.
package hostcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/providers/wasm/internal/wire"
)

// Credentials fetches one credential of an account.
type Credentials interface {
	Credential(ctx context.Context, accountID, name string) (string, error)
}

// Limits of one request, fixed by the ABI.
const (
	// MaxRequestBytes bounds the request JSON a module hands over.
	MaxRequestBytes = 2 << 20
	// MaxRedirects bounds the hops of one request.
	MaxRedirects = 10
	maxHeaders   = 64
	// minRedact is the shortest secret that is scrubbed from text; shorter
	// ones would mangle ordinary text and are not plausible tokens.
	minRedact = 6
	// Redacted replaces a secret wherever it would reach a module or a log.
	Redacted = "[redacted]"
)

// Policy is one module's network policy, built from its manifest.
type Policy struct {
	module      string
	upstreams   map[string]manifest.Upstream
	bases       map[string]*url.URL // default base URLs, validated
	credentials []manifest.Credential
	credHeaders map[string]bool // lower-case
	respBytes   int64
	maxRequests int
	creds       Credentials
	transports  *Transports
	known       known // every credential value handed to a call, to scrub
}

// NewPolicy builds the policy of a validated manifest.
func NewPolicy(m *manifest.Manifest, creds Credentials, tr *Transports) *Policy {
	p := &Policy{
		module:      m.Name,
		upstreams:   m.Upstreams,
		bases:       map[string]*url.URL{},
		credentials: m.Credentials,
		credHeaders: map[string]bool{},
		respBytes:   m.Limits.ResponseBytes,
		maxRequests: m.Limits.RequestsPerCall,
		creds:       creds,
		transports:  tr,
	}
	for name, u := range m.Upstreams {
		b, err := manifest.ParseBaseURL(u.BaseURL, false)
		if err != nil {
			panic("hostcall: unvalidated manifest: " + err.Error())
		}
		p.bases[name] = b
	}
	for _, c := range m.Credentials {
		p.credHeaders[strings.ToLower(c.Header)] = true
	}
	return p
}

// Call is the state of one op call: the account it runs for, the requests
// made so far, the first rule violation and the secrets fetched (to scrub
// them from anything leaving the host). A Call is used by one goroutine.
type Call struct {
	p         *Policy
	accountID string
	config    map[string]string
	hasAcct   bool

	resolved   bool
	resolveErr error
	eff        map[string]*url.URL // upstream -> effective base URL
	allow      []string            // host:port the account configured explicitly

	requests  int
	violation error
	secrets   map[string]string // credential name -> value
	scrub     *scrubber         // finds secrets; nil until needed
	echoed    bool              // a response carried a secret
	pending   []byte
}

// NewCall starts the state of a call for an account; acct nil means the op
// runs without one (describe), and then no request may be made.
func (p *Policy) NewCall(acct *core.Account) *Call {
	c := &Call{p: p}
	if acct != nil {
		c.hasAcct = true
		c.accountID = acct.ID
		c.config = acct.Config
	}
	return c
}

type ctxKey struct{}

// WithCall attaches c to ctx for the host functions.
func WithCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

func callFrom(ctx context.Context) *Call {
	c, _ := ctx.Value(ctxKey{}).(*Call)
	return c
}

// Violation returns the first sandbox rule the module broke in this call,
// or nil. A module that broke a rule is discarded after the call.
func (c *Call) Violation() error {
	if c == nil {
		return nil
	}
	return c.violation
}

// Violate records a rule violation (the first one wins).
func (c *Call) Violate(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if c.violation == nil {
		c.violation = err
	}
	return err
}

// Redact replaces by Redacted every credential value fetched during this
// call or an earlier one of this module (any account), in any encoding
// the scrubber knows (see redact.go).
func (c *Call) Redact(s string) string {
	if c == nil || s == "" {
		return s
	}
	return c.scrubber().redactString(s)
}

// Leaks reports whether s carries a credential value fetched during this
// call or an earlier one of this module, in any encoding the scrubber
// knows.
func (c *Call) Leaks(s string) bool {
	if c == nil || s == "" {
		return false
	}
	return c.scrubber().contains(s)
}

func (c *Call) redactBytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	out := c.scrubber().redact(b)
	if len(out) != len(b) || len(out) > 0 && &out[0] != &b[0] {
		c.echoed = true
	}
	return out
}

// Echoed reports whether an upstream sent back a credential of this call
// (which was redacted before the module saw it). A module result then
// holding Redacted was built from that echo.
func (c *Call) Echoed() bool { return c != nil && c.echoed }

// scrubber finds every credential this module's calls were given, this
// call's included (see known); nil when there are none.
func (c *Call) scrubber() *scrubber {
	if c.scrub == nil {
		c.scrub = c.p.known.scrubber()
	}
	return c.scrub
}

// refusal is a request the host did not (fully) carry out; it becomes the
// error member of the result the module reads.
type refusal struct {
	kind string
	msg  string
}

func (r *refusal) Error() string { return r.msg }

func refuse(kind, format string, args ...any) *refusal {
	return &refusal{kind: kind, msg: fmt.Sprintf(format, args...)}
}

func (c *Call) forbid(format string, args ...any) *refusal {
	return &refusal{kind: wire.KindForbidden, msg: c.Violate(format, args...).Error()}
}

// Request is the JSON a module hands to http_request.
type Request struct {
	Upstream   string            `json:"upstream"`
	Method     string            `json:"method"`
	Path       string            `json:"path"`
	Query      map[string]values `json:"query,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 []byte            `json:"body_base64,omitempty"`
}

// values accepts a string or an array of strings.
type values []string

func (v *values) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*v = values{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("query values must be a string or an array of strings")
	}
	*v = many
	return nil
}

// Result is the JSON a module reads back: a response, or an error.
type Result struct {
	Status     int               `json:"status,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 []byte            `json:"body_base64,omitempty"`
	Error      *wire.ErrorBody   `json:"error,omitempty"`
}

// Do carries out one request and returns the result JSON. Every failure
// is reported inside the result; rule violations are also recorded on c.
func (c *Call) Do(ctx context.Context, raw []byte) []byte {
	res, err := c.do(ctx, raw)
	if err != nil {
		var r *refusal
		if !errors.As(err, &r) {
			r = refuse(string(core.KindUnavailable), "%v", err)
		}
		res = &Result{Error: &wire.ErrorBody{Kind: r.kind, Message: c.Redact(r.msg)}}
	}
	out, merr := json.Marshal(res)
	if merr != nil { // cannot happen with these types
		out = []byte(`{"error":{"kind":"internal","message":"result encoding failed"}}`)
	}
	return out
}

var methods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true}

// sensitive headers a module may never set: they carry identity.
func (c *Call) sensitive(lower string) bool {
	switch lower {
	case "authorization", "proxy-authorization", "cookie", "cookie2":
		return true
	}
	return strings.HasPrefix(lower, "proxy-") || c.p.credHeaders[lower]
}

// hostOwned headers are set by the host or the transport.
var hostOwned = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "connection": true,
	"keep-alive": true, "upgrade": true, "te": true, "trailer": true, "expect": true,
	"forwarded": true, "x-forwarded-for": true, "x-forwarded-host": true, "x-real-ip": true,
	// The transport asks for gzip and decodes it itself, so the host sees
	// (and redacts) the plain body; a body the module asked compressed
	// would pass the redaction unread.
	"accept-encoding": true,
}

func (c *Call) do(ctx context.Context, raw []byte) (*Result, error) {
	if c.violation != nil {
		return nil, refuse(wire.KindForbidden, "refused: this call already broke a sandbox rule (%v)", c.violation)
	}
	if !c.hasAcct {
		return nil, refuse(string(core.KindInvalid), "http_request is not available during describe")
	}
	var req Request
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, refuse(string(core.KindInvalid), "http_request: malformed request JSON: %v", err)
	}
	if _, ok := c.p.bases[req.Upstream]; !ok {
		return nil, c.forbid("request to upstream %q, which the manifest does not declare", req.Upstream)
	}
	if err := c.resolve(); err != nil {
		return nil, err
	}
	base := c.eff[req.Upstream]
	method := strings.ToUpper(req.Method)
	if method == "" {
		method = "GET"
	}
	if !methods[method] {
		return nil, refuse(string(core.KindInvalid), "http_request: method %q is not one of GET, HEAD, POST, PUT, PATCH, DELETE", req.Method)
	}
	hdr, err := c.guestHeaders(req.Headers)
	if err != nil {
		return nil, err
	}
	u, err := buildURL(base, req.Path, req.Query)
	if err != nil {
		return nil, err
	}
	var body []byte
	switch {
	case req.Body != nil && req.BodyBase64 != nil:
		return nil, refuse(string(core.KindInvalid), "http_request: set body or body_base64, not both")
	case req.Body != nil:
		body = []byte(*req.Body)
	case req.BodyBase64 != nil:
		body = req.BodyBase64
	}
	return c.send(ctx, req.Upstream, method, u, hdr, body)
}

func (c *Call) guestHeaders(in map[string]string) (http.Header, error) {
	if len(in) > maxHeaders {
		return nil, refuse(string(core.KindInvalid), "http_request: more than %d headers", maxHeaders)
	}
	h := http.Header{}
	for k, v := range in {
		lk := strings.ToLower(k)
		if !validHeaderName(k) {
			return nil, refuse(string(core.KindInvalid), "http_request: %q is not a valid header name", k)
		}
		if c.sensitive(lk) {
			return nil, c.forbid("module tried to set the %s header; credentials are injected by the host only", http.CanonicalHeaderKey(k))
		}
		if hostOwned[lk] {
			return nil, refuse(string(core.KindInvalid), "http_request: the %s header is set by the host", http.CanonicalHeaderKey(k))
		}
		if !validHeaderValue(v) {
			return nil, refuse(string(core.KindInvalid), "http_request: header %s has an invalid value", http.CanonicalHeaderKey(k))
		}
		h.Set(k, v)
	}
	return h, nil
}

func validHeaderName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(ch)) {
			return false
		}
	}
	return true
}

func validHeaderValue(s string) bool {
	if len(s) > 8192 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if ch := s[i]; ch < 0x20 && ch != '\t' || ch == 0x7f {
			return false
		}
	}
	return true
}

func buildURL(base *url.URL, path string, query map[string]values) (*url.URL, error) {
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") {
		return nil, refuse(string(core.KindInvalid), "http_request: path %q must start with a single /", path)
	}
	if strings.ContainsAny(path, "?#\\") {
		return nil, refuse(string(core.KindInvalid), "http_request: path %q must not contain ?, # or \\; put parameters in query", path)
	}
	for _, r := range path {
		if r <= 0x20 || r == 0x7f || r >= 0x80 {
			return nil, refuse(string(core.KindInvalid), "http_request: path must be percent-encoded ASCII without spaces")
		}
	}
	unescaped, err := url.PathUnescape(path)
	if err != nil {
		return nil, refuse(string(core.KindInvalid), "http_request: path %q has a bad escape", path)
	}
	for _, seg := range strings.Split(unescaped, "/") {
		if seg == "." || seg == ".." {
			return nil, refuse(string(core.KindInvalid), "http_request: path %q must not contain . or .. segments", path)
		}
	}
	u := *base
	u.RawPath = base.EscapedPath() + path
	u.Path, _ = url.PathUnescape(u.RawPath)
	if len(query) > 0 {
		q := url.Values{}
		for k, vs := range query {
			q[k] = vs
		}
		u.RawQuery = q.Encode()
	}
	if len(u.String()) > 16<<10 {
		return nil, refuse(string(core.KindInvalid), "http_request: URL longer than 16 KiB")
	}
	return &u, nil
}

// resolve works out each upstream's effective base URL for the account:
// the manifest's, or the account's override where the manifest allows one.
func (c *Call) resolve() error {
	if c.resolved {
		return c.resolveErr
	}
	c.resolved = true
	c.eff = map[string]*url.URL{}
	seen := map[string]bool{}
	for name, base := range c.p.bases {
		c.eff[name] = base
		field := c.p.upstreams[name].Override
		if field == "" {
			continue
		}
		raw := strings.TrimSpace(c.config[field])
		if raw == "" {
			continue
		}
		// Checked again here, though the account was checked when it was
		// added: an account stored by an older companion, or edited in
		// the database, must not send a credential in clear text.
		u, err := manifest.ParseOverride(raw)
		if err != nil {
			c.resolveErr = refuse(string(core.KindInvalid), "account setting %s %v", field, err)
			return c.resolveErr
		}
		c.eff[name] = u
		hp := hostPort(u)
		if u.Scheme == "http" {
			// Plain http is allowed toward loopback only: the dialer
			// enforces it on the resolved address too.
			hp = loopbackOnly + hp
		}
		if !seen[hp] {
			seen[hp] = true
			c.allow = append(c.allow, hp)
		}
	}
	return nil
}

func hostPort(u *url.URL) string {
	o := manifest.Origin(u)
	return o[strings.Index(o, "://")+3:]
}

// upstreamsAt returns the upstreams whose effective base has origin o.
func (c *Call) upstreamsAt(o string) []string {
	var out []string
	for name, u := range c.eff {
		if manifest.Origin(u) == o {
			out = append(out, name)
		}
	}
	return out
}

func (c *Call) send(ctx context.Context, upstream, method string, u *url.URL, guest http.Header, body []byte) (*Result, error) {
	client := &http.Client{
		Transport: c.p.transports.get(append([]string(nil), c.allow...)),
		// Redirects are followed below, one checked hop at a time.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for hop := 0; ; hop++ {
		if c.requests >= c.p.maxRequests {
			return nil, c.forbid("more than %d requests in one call (limits.requests_per_call)", c.p.maxRequests)
		}
		c.requests++
		reached := c.upstreamsAt(manifest.Origin(u))
		req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
		if err != nil {
			return nil, refuse(string(core.KindInvalid), "http_request: %v", err)
		}
		if body == nil {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		req.Header = guest.Clone()
		if req.Header.Get("User-Agent") == "" {
			req.Header.Set("User-Agent", "companion-wasm/"+c.p.module)
		}
		if err := c.inject(ctx, req.Header, reached); err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, c.transportError(ctx, upstream, u, err)
		}
		if isRedirect(resp.StatusCode) && resp.Header.Get("Location") != "" {
			next, err := u.Parse(resp.Header.Get("Location"))
			drain(resp)
			if err != nil {
				return nil, refuse(string(core.KindUnavailable), "upstream %s sent a malformed redirect", upstream)
			}
			if next.Scheme != "http" && next.Scheme != "https" || next.User != nil {
				return nil, c.forbid("upstream %s redirected to a %s URL, which modules may not reach", upstream, next.Scheme)
			}
			next.Host = strings.ToLower(next.Host)
			next.Fragment = ""
			if len(c.upstreamsAt(manifest.Origin(next))) == 0 {
				return nil, c.forbid("upstream %s redirected to %s, which is not a host this module may reach", upstream, manifest.Origin(next))
			}
			if hop+1 > MaxRedirects {
				return nil, refuse(string(core.KindUnavailable), "upstream %s redirected more than %d times", upstream, MaxRedirects)
			}
			switch {
			case resp.StatusCode == http.StatusSeeOther && method != "HEAD",
				(resp.StatusCode == http.StatusMovedPermanently || resp.StatusCode == http.StatusFound) && method == "POST":
				method, body = "GET", nil
				guest = guest.Clone()
				guest.Del("Content-Type")
			}
			u = next
			continue
		}
		return c.read(ctx, upstream, resp)
	}
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}

// inject sets every credential bound to one of the upstreams this hop
// reaches. A credential never goes to a host it is not bound to.
func (c *Call) inject(ctx context.Context, h http.Header, reached []string) error {
	at := map[string]bool{}
	for _, r := range reached {
		at[r] = true
	}
	for _, cred := range c.p.credentials {
		bound := false
		for _, up := range cred.Upstreams {
			bound = bound || at[up]
		}
		if !bound || h.Get(cred.Header) != "" {
			continue
		}
		v, err := c.secret(ctx, cred.Name)
		if err != nil {
			return err
		}
		h.Set(cred.Header, strings.Replace(cred.Format, "{token}", v, 1))
	}
	return nil
}

func (c *Call) secret(ctx context.Context, name string) (string, error) {
	if v, ok := c.secrets[name]; ok {
		return v, nil
	}
	if c.p.creds == nil {
		return "", refuse(string(core.KindUnavailable), "no credential store is configured, so credential %q cannot be sent", name)
	}
	v, err := c.p.creds.Credential(ctx, c.accountID, name)
	if err != nil {
		if core.IsKind(err, core.KindNotFound) {
			return "", refuse(string(core.KindUnauthorized), "account %s has no credential %q; add the account again with it", c.accountID, name)
		}
		var ce *core.Error
		if errors.As(err, &ce) && ce.Message != "" {
			return "", refuse(string(ce.Kind), "credential %q could not be read: %s", name, ce.Message)
		}
		return "", refuse(string(core.KindUnavailable), "credential %q could not be read from the secret store", name)
	}
	if c.secrets == nil {
		c.secrets = map[string]string{}
	}
	c.secrets[name] = v // remember before validating so it is scrubbed either way
	c.p.known.add(c.accountID, name, v)
	c.scrub = nil
	if v == "" {
		return "", refuse(string(core.KindUnauthorized), "credential %q of account %s is empty", name, c.accountID)
	}
	if !validHeaderValue(v) || strings.ContainsAny(v, "\t") {
		return "", refuse(string(core.KindUnauthorized), "credential %q of account %s contains characters that cannot go in an HTTP header", name, c.accountID)
	}
	return v, nil
}

func (c *Call) transportError(ctx context.Context, upstream string, u *url.URL, err error) error {
	var blocked *BlockedAddrError
	if errors.As(err, &blocked) {
		return c.forbid("upstream %s (%s) resolves to %s, which is private, loopback or link-local; only an account's own base URL setting may point there", upstream, u.Hostname(), blocked.Addr)
	}
	var notLoop *NotLoopbackError
	if errors.As(err, &notLoop) {
		return refuse(string(core.KindInvalid), "upstream %s: the account's plain http:// URL names %s, which resolves to %s, not a loopback address; use https://", upstream, u.Hostname(), notLoop.Addr)
	}
	if ctx.Err() != nil {
		return refuse(string(core.KindUnavailable), "request to upstream %s did not finish before the call's deadline", upstream)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return refuse(string(core.KindUnavailable), "upstream %s: cannot resolve %s", upstream, u.Hostname())
	}
	// url.Error texts repeat the URL; keep only the cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return refuse(string(core.KindUnavailable), "request to upstream %s failed: %v", upstream, err)
}

func (c *Call) read(ctx context.Context, upstream string, resp *http.Response) (*Result, error) {
	defer resp.Body.Close()
	limit := c.p.respBytes
	if resp.ContentLength > limit {
		return nil, c.forbid("upstream %s sent a %d-byte response; the module's limit is %d bytes (limits.response_bytes)", upstream, resp.ContentLength, limit)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if int64(len(b)) > limit {
		return nil, c.forbid("upstream %s sent more than %d bytes (limits.response_bytes)", upstream, limit)
	}
	if err != nil && ctx.Err() != nil {
		// A body that trickles (or stalls) past the call's budget.
		return nil, refuse(string(core.KindUnavailable), "the response of upstream %s did not finish before the call's deadline (HTTP %d, %d bytes received)", upstream, resp.StatusCode, len(b))
	}
	if err != nil {
		return nil, refuse(string(core.KindUnavailable), "reading the response of upstream %s failed: %v", upstream, err)
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return nil, refuse(string(core.KindUnavailable), "upstream %s sent a %q-encoded body, which the host cannot check for credentials; modules receive plain bodies only", upstream, ce)
	}
	b = c.redactBytes(b)
	res := &Result{Status: resp.StatusCode, Headers: map[string]string{}}
	for k, vs := range resp.Header {
		if k == "Set-Cookie" || k == "Set-Cookie2" {
			continue
		}
		v := strings.Join(vs, ", ")
		if r := c.Redact(v); r != v {
			v, c.echoed = r, true
		}
		res.Headers[k] = v
	}
	if utf8.Valid(b) {
		s := string(b)
		res.Body = &s
	} else {
		res.BodyBase64 = b
	}
	return res, nil
}
