package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Request is one HTTP request to an upstream declared in the manifest.
type Request struct {
	// Upstream names the API, as in the manifest's upstreams.
	Upstream string
	// Method defaults to GET.
	Method string
	// Path is appended to the upstream's base URL; it starts with "/" and
	// is percent-encoded (use url.PathEscape on ids).
	Path    string
	Query   url.Values
	Headers map[string]string
	Body    []byte
	// JSON, when set, is encoded as the body with Content-Type
	// application/json.
	JSON any
}

// Response is an upstream's answer.
type Response struct {
	Status int
	// Headers have canonical names (Content-Type); repeated headers are
	// joined with ", ".
	Headers map[string]string
	Body    []byte
}

// Header returns a response header by name, case-insensitively.
func (r *Response) Header(name string) string {
	return r.Headers[canonicalKey(name)]
}

// Decode unmarshals the JSON body into v.
func (r *Response) Decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return Errorf(Unavailable, "upstream sent malformed JSON (HTTP %d): %v", r.Status, err)
	}
	return nil
}

// Err maps a non-2xx status to an *Error: 401/403 Unauthorized, 404/410
// NotFound, 409/412 Conflict, 429 RateLimited (with Retry-After), 408 and
// 5xx Unavailable, other 4xx Invalid. It returns nil for 1xx-3xx.
func (r *Response) Err() error {
	if r.Status < 400 {
		return nil
	}
	var kind Kind
	switch {
	case r.Status == 401 || r.Status == 403:
		kind = Unauthorized
	case r.Status == 404 || r.Status == 410:
		kind = NotFound
	case r.Status == 409 || r.Status == 412:
		kind = Conflict
	case r.Status == 429:
		kind = RateLimited
	case r.Status == 408 || r.Status >= 500:
		kind = Unavailable
	default:
		kind = Invalid
	}
	msg := fmt.Sprintf("HTTP %d", r.Status)
	if d := detail(r.Body); d != "" {
		msg += ": " + d
	}
	e := &Error{Kind: kind, Message: msg}
	if kind == RateLimited || kind == Unavailable {
		e.RetryAfter = RetryAfter(r.Header("Retry-After"), time.Now())
	}
	return e
}

// detail pulls a human message out of a typical JSON error body.
func detail(body []byte) string {
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	for _, k := range []string{"message", "error", "detail", "error_description"} {
		switch s := v[k].(type) {
		case string:
			return clip(s)
		case map[string]any:
			if m, ok := s["message"].(string); ok {
				return clip(m)
			}
		}
	}
	return ""
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// RetryAfter parses a Retry-After header (seconds or an HTTP date).
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second))
	}
	if t, err := time.Parse(httpTime, v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

const httpTime = "Mon, 02 Jan 2006 15:04:05 GMT"

// canonicalKey is the canonical form of a header name (content-type ->
// Content-Type), as the host reports them; net/http is too heavy to link.
func canonicalKey(s string) string {
	b := []byte(s)
	upper := true
	for i, c := range b {
		switch {
		case upper && 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case !upper && 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
		upper = c == '-'
	}
	return string(b)
}

// Client makes requests through the host for the duration of one op.
type Client struct{ ctx context.Context }

// HTTP returns a client bound to ctx: once ctx is done or its deadline
// has passed, Do fails at once.
func HTTP(ctx context.Context) *Client { return &Client{ctx: ctx} }

// Do sends req through the host. Refusals by the host and network failures
// come back as *Error with FromHost set: Forbidden when the request broke a
// sandbox rule (the host then ends the module instance after this op),
// Invalid for a malformed request, Unavailable for network trouble and
// Unauthorized when the account lacks a credential. A response with any
// status is returned as is; see Response.Err.
func (c *Client) Do(req Request) (*Response, error) {
	if c.ctx != nil {
		if err := c.ctx.Err(); err != nil {
			return nil, &Error{Kind: Unavailable, Message: "deadline reached before the request: " + err.Error()}
		}
		if dl, ok := c.ctx.Deadline(); ok && !time.Now().Before(dl) {
			return nil, &Error{Kind: Unavailable, Message: "deadline reached before the request"}
		}
	}
	w := requestJSON{Upstream: req.Upstream, Method: req.Method, Path: req.Path, Headers: req.Headers}
	if len(req.Query) > 0 {
		w.Query = map[string][]string(req.Query)
	}
	body := req.Body
	if req.JSON != nil {
		b, err := json.Marshal(req.JSON)
		if err != nil {
			return nil, Errorf(Internal, "encoding the request body: %v", err)
		}
		body = b
		if w.Headers == nil {
			w.Headers = map[string]string{}
		}
		if _, ok := w.Headers["Content-Type"]; !ok {
			w.Headers["Content-Type"] = "application/json"
		}
	}
	if body != nil {
		w.BodyBase64 = body
	}
	raw, err := json.Marshal(w)
	if err != nil {
		return nil, Errorf(Internal, "encoding the request: %v", err)
	}
	out, err := hostHTTP(raw)
	if err != nil {
		return nil, err
	}
	var res resultJSON
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, &Error{Kind: Internal, Message: "malformed result from the host: " + err.Error(), FromHost: true}
	}
	if res.Error != nil {
		return nil, &Error{Kind: res.Error.Kind, Message: res.Error.Message, FromHost: true}
	}
	resp := &Response{Status: res.Status, Headers: res.Headers, Body: res.BodyBase64}
	if res.Body != nil {
		resp.Body = []byte(*res.Body)
	}
	if resp.Headers == nil {
		resp.Headers = map[string]string{}
	}
	return resp, nil
}

type requestJSON struct {
	Upstream   string              `json:"upstream"`
	Method     string              `json:"method,omitempty"`
	Path       string              `json:"path"`
	Query      map[string][]string `json:"query,omitempty"`
	Headers    map[string]string   `json:"headers,omitempty"`
	BodyBase64 []byte              `json:"body_base64,omitempty"`
}

type resultJSON struct {
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers"`
	Body       *string           `json:"body"`
	BodyBase64 []byte            `json:"body_base64"`
	Error      *errorJSON        `json:"error"`
}

type errorJSON struct {
	Kind    Kind   `json:"kind"`
	Message string `json:"message"`
}
