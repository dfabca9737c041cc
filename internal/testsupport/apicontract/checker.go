// Package apicontract checks HTTP exchanges with companion against its
// OpenAPI document (ui-bridge/openapi.json) with kin-openapi's
// openapi3filter: a request or answer the document does not describe (an
// unknown route, method, status, content type or field) is a failure.
//
// The e2e suite installs a Checker's Transport as http.DefaultTransport and
// registers each companion process it starts; requests to anything else
// (emulators, object stores, an OIDC provider, an ingress) pass through
// unchecked. WebSockets dialled by the Go harness are checked with
// CheckHandshake and CheckMessage. Clients that are not Go are checked
// through two relays that share one WebSocket relay (relay.go): headless
// Chromium through BrowserProxy (its plain HTTP, and its WebSockets inside
// CONNECT tunnels to a registered companion), and the Node.js client,
// which cannot use a proxy, through a Front on companion's address.
package apicontract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// RestExtension names, on a path item, the path parameter that takes the
// rest of the URL path, slashes included (Go's {name...}), which OpenAPI
// templates cannot say.
const RestExtension = "x-companion-rest-parameter"

// Checker validates exchanges with registered companion processes.
type Checker struct {
	doc    *openapi3.T
	routes []route
	stream *openapi3.Schema
	errs   *openapi3.Schema // the error body

	mu       sync.Mutex
	checked  int                     // exchanges and messages checked
	seen     map[string]map[int]bool // "METHOD template" → statuses answered
	targets  map[string]string       // host:port → base path
	failures map[string][]string
}

// route is one path template of the document, split into segments.
type route struct {
	tmpl     string
	item     *openapi3.PathItem
	segs     []string
	rest     string // the rest parameter's name, if any
	literals int
}

// Load reads an OpenAPI document, checks it with doc.Validate and
// prepares its routes.
func Load(data []byte) (*Checker, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("apicontract: loading the document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("apicontract: the document is not valid OpenAPI: %w", err)
	}
	c := &Checker{doc: doc, targets: map[string]string{}, failures: map[string][]string{}, seen: map[string]map[int]bool{}}
	for tmpl, item := range doc.Paths.Map() {
		r := route{tmpl: tmpl, item: item, segs: strings.Split(strings.TrimPrefix(tmpl, "/"), "/")}
		if v, ok := item.Extensions[RestExtension].(string); ok {
			r.rest = v
		}
		for _, s := range r.segs {
			if !isParam(s) {
				r.literals++
			}
		}
		c.routes = append(c.routes, r)
	}
	// The most literal template wins (/v1/providers/inspect over
	// /v1/providers/{name}), then the longest, as Go's ServeMux does.
	sort.Slice(c.routes, func(i, j int) bool {
		a, b := c.routes[i], c.routes[j]
		if a.literals != b.literals {
			return a.literals > b.literals
		}
		if len(a.segs) != len(b.segs) {
			return len(a.segs) > len(b.segs)
		}
		return a.tmpl < b.tmpl
	})
	if s := doc.Components.Schemas["StreamMessage"]; s != nil {
		c.stream = s.Value
	}
	s := doc.Components.Schemas["Error"]
	if s == nil {
		return nil, fmt.Errorf("apicontract: the document has no Error schema")
	}
	c.errs = s.Value
	return c, nil
}

// Doc is the loaded document.
func (c *Checker) Doc() *openapi3.T { return c.doc }

// Register makes exchanges with the companion at baseURL (its ready URL,
// base path included) checked.
func (c *Checker) Register(baseURL string) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		panic("apicontract: Register needs an absolute URL, not " + baseURL)
	}
	c.mu.Lock()
	c.targets[u.Host] = strings.TrimSuffix(u.Path, "/")
	c.mu.Unlock()
}

// Forget stops checking baseURL's companion and returns the failures
// recorded for it since it was registered.
func (c *Checker) Forget(baseURL string) []string {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.targets, u.Host)
	f := c.failures[u.Host]
	delete(c.failures, u.Host)
	return f
}

// Failures returns and clears every failure recorded and not yet taken by
// Forget.
func (c *Checker) Failures() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for h, f := range c.failures {
		out = append(out, f...)
		delete(c.failures, h)
	}
	return out
}

// target reports whether host is a registered companion, and its base
// path.
func (c *Checker) target(host string) (base string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	base, ok = c.targets[host]
	return base, ok
}

// Checked is how many exchanges and stream messages were checked.
func (c *Checker) Checked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checked
}

// Coverage lists every operation of the document with the statuses the
// checked exchanges got from it ("-" for none), sorted.
func (c *Checker) Coverage() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for tmpl, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			var st []string
			for code := range c.seen[method+" "+tmpl] {
				st = append(st, fmt.Sprint(code))
			}
			sort.Strings(st)
			if len(st) == 0 {
				st = []string{"-"}
			}
			out = append(out, method+" "+tmpl+": "+strings.Join(st, " "))
		}
	}
	sort.Strings(out)
	return out
}

func (c *Checker) saw(op string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[op] == nil {
		c.seen[op] = map[int]bool{}
	}
	c.seen[op][status] = true
}

func (c *Checker) count() {
	c.mu.Lock()
	c.checked++
	c.mu.Unlock()
}

func (c *Checker) record(host, msg string) {
	c.mu.Lock()
	c.failures[host] = append(c.failures[host], msg)
	c.mu.Unlock()
}

// Transport wraps next (nil: a clone of http.DefaultTransport's
// *http.Transport) so that exchanges with registered companions are
// checked. Failures are recorded, never returned: the client sees exactly
// what companion answered.
func (c *Checker) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{c: c, next: next}
}

type transport struct {
	c    *Checker
	next http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base, ok := t.c.target(req.URL.Host)
	if !ok {
		return t.next.RoundTrip(req)
	}
	// Only a body that can be read again is checked: a streamed one (a
	// slow upload, a pipe) must reach companion untouched.
	var reqBody []byte
	bodyKnown := req.Body == nil || req.Body == http.NoBody
	if !bodyKnown && req.GetBody != nil && isJSON(req.Header.Get("Content-Type")) {
		if rc, err := req.GetBody(); err == nil {
			reqBody, _ = io.ReadAll(rc)
			rc.Close()
			bodyKnown = true
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	var respBody []byte
	bodyRead := false
	if isJSON(resp.Header.Get("Content-Type")) && req.Method != http.MethodHead {
		respBody, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(respBody))
		if err != nil {
			return resp, nil // the client will see the same short body
		}
		bodyRead = true
	}
	if msg := t.c.Check(base, req, reqBody, bodyKnown, resp, respBody, bodyRead); msg != "" {
		t.c.record(req.URL.Host, msg)
	}
	return resp, nil
}

// Check validates one exchange and returns "" or what is wrong. reqBody
// is the request body when bodyKnown; respBody the answer's body when
// bodyRead (only JSON answers are read: files, streams, scripts and the
// agent-server's passthrough are checked for status and content type).
func (c *Checker) Check(base string, req *http.Request, reqBody []byte, bodyKnown bool, resp *http.Response, respBody []byte, bodyRead bool) string {
	c.count()
	path, under := strings.CutPrefix(req.URL.Path, base)
	if base != "" && (!under || path == "") {
		path = "/" + strings.TrimPrefix(req.URL.Path, "/")
		under = false
	}
	what := fmt.Sprintf("%s %s → %d", req.Method, req.URL.Path, resp.StatusCode)
	fail := func(format string, a ...any) string {
		return "api contract: " + what + ": " + fmt.Sprintf(format, a...)
	}
	isError := func() bool { return bodyRead && c.isErrorBody(respBody) }

	// CORS preflights are answered by the gate on every route (the
	// document says so once, in its description).
	if req.Method == http.MethodOptions && req.Header.Get("Access-Control-Request-Method") != "" {
		if resp.StatusCode == http.StatusNoContent || (resp.StatusCode == http.StatusForbidden && isError()) {
			return ""
		}
		return fail("a CORS preflight is answered 204, or 403 with the error body")
	}
	r, params, found := c.find(path)
	if !found || (base != "" && !under) {
		if resp.StatusCode == http.StatusNotFound && isError() {
			return "" // companion agrees there is no such route
		}
		if resp.StatusCode == http.StatusForbidden && isError() {
			return "" // the gate refused it before routing
		}
		return fail("no route of the document matches %s", path)
	}
	method := req.Method
	op := r.item.GetOperation(method)
	if op == nil && method == http.MethodHead {
		method = http.MethodGet // Go's mux answers HEAD for every GET
		op = r.item.GetOperation(method)
	}
	if op == nil {
		if (resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized) && isError() {
			return ""
		}
		return fail("the document has no %s on %s", req.Method, r.tmpl)
	}
	what = fmt.Sprintf("%s %s (%s %s) → %d", req.Method, req.URL.Path, method, r.tmpl, resp.StatusCode)
	c.saw(method+" "+r.tmpl, resp.StatusCode)

	vreq := req.Clone(context.Background())
	vreq.Method = method
	vreq.URL.Path = path
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	vreq.ContentLength = int64(len(reqBody))
	in := &openapi3filter.RequestValidationInput{
		Request:    vreq,
		PathParams: params,
		Route:      &routers.Route{Spec: c.doc, Path: r.tmpl, PathItem: r.item, Method: method, Operation: op},
		Options: &openapi3filter.Options{
			AuthenticationFunc:                openapi3filter.NoopAuthenticationFunc,
			ExcludeRequestBody:                !bodyKnown,
			RejectWhenRequestBodyNotSpecified: true,
			MultiError:                        true,
		},
	}
	if reqErr := openapi3filter.ValidateRequest(context.Background(), in); reqErr != nil {
		// A request the document refuses must be refused by companion
		// too, with a documented status and the error body.
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			return fail("the document refuses this request (%v), but companion answered %d", oneLine(reqErr), resp.StatusCode)
		}
		if op.Responses.Status(resp.StatusCode) == nil {
			return fail("status %d is not documented for %s %s (the request was refused by the document too: %v)", resp.StatusCode, method, r.tmpl, oneLine(reqErr))
		}
		if !isError() {
			return fail("a refusal must carry the error body, got %q", clip(respBody))
		}
		return ""
	}
	body := respBody
	if !bodyRead {
		body = nil
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	if req.Method == http.MethodHead || !bodyRead {
		// Status and content type only.
		if op.Responses.Status(resp.StatusCode) == nil && op.Responses.Default() == nil && resp.StatusCode != http.StatusNotModified {
			return fail("status %d is not documented for %s %s", resp.StatusCode, method, r.tmpl)
		}
		if req.Method == http.MethodHead {
			return ""
		}
		if msg := c.checkContentType(op, resp); msg != "" {
			return fail("%s", msg)
		}
		return ""
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fail("%v; body %s", oneLine(err), clip(respBody))
	}
	return ""
}

// checkContentType checks an answer whose body is not read: its content
// type must be one the document lists for its status (none when the
// document lists no content).
func (c *Checker) checkContentType(op *openapi3.Operation, resp *http.Response) string {
	ref := op.Responses.Status(resp.StatusCode)
	if ref == nil {
		ref = op.Responses.Default()
	}
	if ref == nil || ref.Value == nil {
		return ""
	}
	ct := resp.Header.Get("Content-Type")
	if len(ref.Value.Content) == 0 {
		return ""
	}
	if ref.Value.Content.Get(ct) == nil {
		return fmt.Sprintf("content type %q is not documented for status %d", ct, resp.StatusCode)
	}
	return ""
}

// find matches path against the document's templates.
func (c *Checker) find(path string) (route, map[string]string, bool) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for _, r := range c.routes {
		if params, ok := r.match(segs); ok {
			return r, params, true
		}
	}
	return route{}, nil, false
}

func (r route) match(segs []string) (map[string]string, bool) {
	params := map[string]string{}
	for i, s := range r.segs {
		if i >= len(segs) {
			return nil, false
		}
		if !isParam(s) {
			if segs[i] != s {
				return nil, false
			}
			continue
		}
		name := s[1 : len(s)-1]
		if name == r.rest && i == len(r.segs)-1 {
			rest := strings.Join(segs[i:], "/")
			if rest == "" {
				return nil, false
			}
			params[name] = rest
			return params, true
		}
		if segs[i] == "" {
			return nil, false
		}
		v, err := url.PathUnescape(segs[i])
		if err != nil {
			return nil, false
		}
		params[name] = v
	}
	if len(segs) != len(r.segs) {
		return nil, false
	}
	return params, true
}

func isParam(seg string) bool {
	return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}")
}

// CheckHandshake checks a WebSocket handshake the e2e harness made with
// a dialer that does not use http.Transport (gorilla/websocket): the
// request it sent (method GET on target, with header) and the answer it
// got (nil when the connection failed before one). The answer's body, if
// any, is read and put back.
func (c *Checker) CheckHandshake(target string, header http.Header, resp *http.Response) {
	if resp == nil {
		return
	}
	u, err := url.Parse(target)
	if err != nil {
		return
	}
	u.Scheme = strings.Replace(strings.Replace(u.Scheme, "wss", "https", 1), "ws", "http", 1)
	base, ok := c.target(u.Host)
	if !ok {
		return
	}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return
	}
	for k, v := range header {
		req.Header[k] = v
	}
	var body []byte
	read := false
	if resp.Body != nil && isJSON(resp.Header.Get("Content-Type")) {
		body, _ = io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		read = true
	}
	if msg := c.Check(base, req, nil, true, resp, body, read); msg != "" {
		c.record(u.Host, msg)
	}
}

// CheckMessage checks one stream message companion at host sent against
// the document's StreamMessage schema.
func (c *Checker) CheckMessage(host string, data []byte) {
	if c.stream == nil {
		return
	}
	if _, ok := c.target(host); !ok {
		return
	}
	c.count()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		c.record(host, fmt.Sprintf("api contract: stream message is not JSON: %v: %s", err, clip(data)))
		return
	}
	if err := c.stream.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()); err != nil {
		c.record(host, fmt.Sprintf("api contract: stream message does not match StreamMessage: %v: %s", oneLine(err), clip(data)))
	}
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// isErrorBody reports whether b is companion's error body, as the
// document's Error schema says.
func (c *Checker) isErrorBody(b []byte) bool {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return false
	}
	return c.errs.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()) == nil
}

// oneLine says err briefly: kin-openapi's schema errors print the whole
// schema, which buries the one line that matters (where, and why).
func oneLine(err error) string {
	var parts []string
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case openapi3.MultiError:
			for _, x := range e {
				walk(x)
			}
		case *openapi3filter.ResponseError:
			if e.Err == nil {
				parts = append(parts, e.Reason)
				return
			}
			parts = append(parts, e.Reason+":")
			walk(e.Err)
		case *openapi3filter.RequestError:
			if e.Err == nil {
				parts = append(parts, e.Error())
				return
			}
			if e.Parameter != nil {
				parts = append(parts, "parameter "+e.Parameter.Name+":")
			} else if e.Reason != "" {
				parts = append(parts, e.Reason+":")
			}
			walk(e.Err)
		case *openapi3.SchemaError:
			at := "/" + strings.Join(e.JSONPointer(), "/")
			parts = append(parts, "at "+at+": "+e.Reason+";")
		default:
			parts = append(parts, err.Error())
		}
	}
	walk(err)
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
}

func clip(b []byte) string {
	const max = 600
	if len(b) > max {
		return fmt.Sprintf("%q…", b[:max])
	}
	return fmt.Sprintf("%q", b)
}
