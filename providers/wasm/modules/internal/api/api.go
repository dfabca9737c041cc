// Package api holds what the first-party provider modules share: one JSON
// call through the host, the mapping of HTTP failures onto the SDK's error
// kinds (with Retry-After read from every header shape the providers use),
// a tolerant time type, and label housekeeping.
//
// It uses nothing but the public SDK, so it is what any third-party module
// could carry itself.
package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

// Upstream is the manifest upstream every first-party module calls.
const Upstream = "api"

// MaxPages bounds how many pages one list follows. Each page is one
// request, and the manifests allow 64 per call: stopping here gives a
// clear error instead of the host's refusal of request 65.
const MaxPages = 60

// TooManyPages is the error a list returns past MaxPages.
func TooManyPages(provider string, perPage int) error {
	return sdk.Errorf(sdk.Invalid, "the %s account has more than %d boxes, more than companion lists in one call", provider, MaxPages*perPage)
}

// Client calls one provider's API through the host.
type Client struct {
	// Provider is the provider's name as people know it ("Daytona"), used
	// in error messages.
	Provider string
	// Headers are added to every request (never credentials: the host
	// injects those).
	Headers map[string]string
	// Adjust, if set, may change the error made from a failed response
	// (a provider's own codes for state errors, say).
	Adjust func(resp *sdk.Response, e *sdk.Error)
}

// Call sends one request. A non-nil body is sent as JSON. On a 2xx answer
// with a body, out (if non-nil) receives the decoded JSON; unknown fields
// are ignored. Any other answer becomes an *sdk.Error (see ErrorFrom).
func (c Client) Call(ctx context.Context, method, path string, query url.Values, body, out any) (*sdk.Response, error) {
	req := sdk.Request{Upstream: Upstream, Method: method, Path: path, Query: query, JSON: body}
	if len(c.Headers) > 0 {
		req.Headers = make(map[string]string, len(c.Headers)+2)
		for k, v := range c.Headers {
			req.Headers[k] = v
		}
	}
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	req.Headers["Accept"] = "application/json"
	resp, err := sdk.HTTP(ctx).Do(req)
	if err != nil {
		return nil, err
	}
	if resp.Status < 200 || resp.Status > 299 {
		e := ErrorFrom(c.Provider, resp, time.Now())
		if c.Adjust != nil {
			c.Adjust(resp, e)
		}
		return resp, e
	}
	if out != nil && len(strings.TrimSpace(string(resp.Body))) > 0 {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return resp, sdk.Errorf(sdk.Unavailable, "%s sent a response companion cannot read (HTTP %d %s %s): %v",
				c.Provider, resp.Status, method, path, err)
		}
	}
	return resp, nil
}

// ErrorFrom maps a failed response onto an error kind:
//
//	401, 403            unauthorized (the token was refused)
//	404, 410            not_found
//	409, 423            conflict
//	429                 rate_limited, retry_after from the headers
//	408, 5xx but 501    unavailable, retry_after when given
//	501                 invalid (the provider does not offer this here)
//	other 4xx           invalid
//
// The message carries the provider's own message, read from any of the
// error body shapes the providers use.
func ErrorFrom(provider string, resp *sdk.Response, now time.Time) *sdk.Error {
	st := resp.Status
	detail := Detail(resp.Body)
	what := fmt.Sprintf("HTTP %d", st)
	if detail != "" {
		what += ": " + detail
	}
	e := &sdk.Error{}
	switch {
	case st == 401 || st == 403:
		e.Kind = sdk.Unauthorized
		e.Message = fmt.Sprintf("%s refused the account's API token (%s); check or replace the token", provider, what)
	case st == 404 || st == 410:
		e.Kind = sdk.NotFound
		e.Message = fmt.Sprintf("%s: not found (%s)", provider, what)
	case st == 409 || st == 423:
		e.Kind = sdk.Conflict
		e.Message = fmt.Sprintf("%s refused the action in the box's current state (%s)", provider, what)
	case st == 429:
		e.Kind = sdk.RateLimited
		e.RetryAfter = RetryAfter(resp, now)
		e.Message = fmt.Sprintf("%s rate limit reached (%s)", provider, what)
	case st == 501:
		e.Kind = sdk.Invalid
		e.Message = fmt.Sprintf("%s does not support this here (%s)", provider, what)
	case st == 408 || st >= 500:
		e.Kind = sdk.Unavailable
		e.RetryAfter = RetryAfter(resp, now)
		e.Message = fmt.Sprintf("%s is unavailable (%s); companion will retry", provider, what)
	default:
		e.Kind = sdk.Invalid
		e.Message = fmt.Sprintf("%s refused the request (%s)", provider, what)
	}
	return e
}

// Detail pulls a person-readable message out of an error body. It reads
// the shapes of all three providers: Daytona {statusCode, error, message}
// where message may be a list (NestJS validation), E2B {code, message},
// DigitalOcean {id, message, request_id} and {error: {code, message}}.
// Anything else gives "".
func Detail(body []byte) string {
	var v struct {
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	for _, raw := range []json.RawMessage{v.Message, v.Error, v.Detail} {
		if s := text(raw); s != "" {
			return clip(s)
		}
	}
	return ""
}

// text reads a JSON string, a list of strings, or an object with a
// message (and code).
func text(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.TrimSpace(strings.Join(list, "; "))
	}
	var obj struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return strings.TrimSpace(obj.Message)
	}
	return ""
}

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		cut := 200
		for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// Code returns the machine-readable code of an error body, if any: a
// string "code" at the top (Daytona) or inside "error" (DigitalOcean), or
// DigitalOcean's classic "id".
func Code(body []byte) string {
	var v struct {
		Code  json.RawMessage `json:"code"`
		ID    string          `json:"id"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(v.Code, &s) == nil && s != "" {
		return s
	}
	var inner struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(v.Error, &inner) == nil && inner.Code != "" {
		return inner.Code
	}
	return v.ID
}

// RetryAfter reads how long the provider asked to wait, from (in order):
//
//	Retry-After                  seconds or an HTTP date (all three providers)
//	Retry-After-{throttler}      Daytona's per-throttler form (the longest)
//	X-RateLimit-Reset-{...}      Daytona: seconds until the window resets
//	RateLimit-Reset              E2B: seconds; DigitalOcean: a Unix time
//
// RateLimit-Reset is read both ways: a value that looks like a Unix time
// (after 2001) is taken as one, a smaller one as seconds, because the
// providers disagree and E2B's unit is not documented. It returns 0 when
// nothing usable is present.
func RetryAfter(resp *sdk.Response, now time.Time) time.Duration {
	if d := sdk.RetryAfter(resp.Header("Retry-After"), now); d > 0 {
		return d
	}
	var best time.Duration
	for k, v := range resp.Headers {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "retry-after-") {
			best = max(best, sdk.RetryAfter(v, now))
		}
	}
	if best > 0 {
		return best
	}
	for k, v := range resp.Headers {
		if strings.HasPrefix(strings.ToLower(k), "x-ratelimit-reset-") {
			best = max(best, seconds(v))
		}
	}
	if best > 0 {
		return best
	}
	if v := strings.TrimSpace(resp.Header("Ratelimit-Reset")); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		switch {
		case err != nil || n <= 0:
		case n > 1e9:
			if at := time.Unix(int64(n), 0); at.After(now) {
				return at.Sub(now)
			}
		default:
			return time.Duration(n * float64(time.Second))
		}
	}
	return 0
}

func seconds(v string) time.Duration {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || n <= 0 || n > 86400 {
		return 0
	}
	return time.Duration(n * float64(time.Second))
}

// NotFound rewords a not-found error about one box, naming it as what
// ("E2B sandbox"); other errors pass through.
func NotFound(err error, what, id string) error {
	if IsKind(err, sdk.NotFound) {
		return sdk.Errorf(sdk.NotFound, "%s %s does not exist (any more)", what, id)
	}
	return err
}

// IsKind reports whether err is an *sdk.Error of kind k.
func IsKind(err error, k sdk.Kind) bool {
	e, ok := err.(*sdk.Error)
	return ok && e.Kind == k
}

// Time is a timestamp that decodes from RFC 3339 (with or without
// fractional seconds), and treats null, "" and unparseable values as
// unknown rather than failing the whole answer.
type Time struct{ time.Time }

// UnmarshalJSON implements json.Unmarshaler.
func (t *Time) UnmarshalJSON(b []byte) error {
	t.Time = time.Time{}
	var s string
	if json.Unmarshal(b, &s) != nil || s == "" {
		return nil
	}
	if v, err := time.Parse(time.RFC3339Nano, s); err == nil {
		t.Time = v.UTC()
	}
	return nil
}

// PathID escapes a box id for use as one path segment.
func PathID(id string) string { return url.PathEscape(id) }

// CheckID refuses an empty id before any request is made.
func CheckID(id string) error {
	if id == "" {
		return sdk.Errorf(sdk.Invalid, "no box id given")
	}
	return nil
}

// CheckOptions refuses create options the module does not know, so a typo
// is reported instead of silently ignored.
func CheckOptions(opts map[string]string, known ...string) error {
	for k := range opts {
		ok := false
		for _, n := range known {
			ok = ok || k == n
		}
		if !ok {
			return sdk.Errorf(sdk.Invalid, "unknown option %q (this provider takes: %s)", k, strings.Join(known, ", "))
		}
	}
	return nil
}

// First returns the first non-empty value.
func First(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
