// Package agentclient talks to the OpenHands agent-server inside a box, as
// shared/reference/agent-server.md describes it: /server_info (the idle
// clock), conversation search with its paging, the trajectory zip of each
// conversation and the workspace archive (tar.gz, the full capture, and
// git-delta, the compact one) with its X-Archive-* headers.
//
// Guarantees:
//   - Bodies are streamed: Download.Body is the live response body; nothing
//     here reads an archive or a trajectory into memory.
//   - Every failed call is an *Error whose Class (and errors.Is against
//     ErrNothingToArchive, ErrUnconfirmed, ErrRetryable, ErrPermanent) says
//     how a delete must treat it; Retry-After is parsed when sent.
//   - Unknown JSON fields are ignored; where the reference marks a reading
//     uncertain (e.g. idle_time as 12 or 12.0, ids dashed or 32-hex,
//     header values percent-encoded or not) both are accepted.
//   - The session key travels only in X-Session-API-Key and never appears
//     in an error text.
//
// Which calls move the box's idle clock is the caller's concern: Archive
// does (upstream counts it as activity), the others do not. This package
// is not wired into any delete yet.
package agentclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// SessionKeyHeader carries the box's agent-server key on /api/* routes.
const SessionKeyHeader = "X-Session-API-Key"

// Endpoint is how companion reaches one box's agent-server: the URL its
// provider exposes plus the headers that provider's proxy wants (e.g.
// X-Daytona-Preview-Token), and the agent-server's own session key.
type Endpoint struct {
	URL        string
	Headers    http.Header
	SessionKey string
}

// Client calls one box's agent-server. It is safe for concurrent use.
type Client struct {
	base *url.URL
	ep   Endpoint
	hc   *http.Client
	now  func() time.Time
}

// New checks the endpoint and returns a client using hc (nil means a client
// with no overall timeout: archives may take long; use contexts).
func New(ep Endpoint, hc *http.Client) (*Client, error) {
	u, err := url.Parse(ep.URL)
	if err != nil {
		return nil, fmt.Errorf("agent-server endpoint: bad URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("agent-server endpoint: URL must be http(s)://host[:port][/prefix], got scheme %q host %q", u.Scheme, u.Host)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	if hc == nil {
		hc = &http.Client{}
	}
	// A redirect is refused, not followed: Go forwards custom headers (the
	// session key, a provider's preview token) to wherever it points.
	own := *hc
	own.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: u, ep: ep, hc: &own, now: time.Now}, nil
}

// maxJSON bounds the JSON answers this client decodes (a search page of 100
// conversations with their agent configs stays far below it).
const maxJSON = 32 << 20

// do sends a GET and returns the response when it is 200; any other answer
// or a network failure becomes an *Error and the body is closed.
func (c *Client) do(ctx context.Context, op, path string, q url.Values, archive bool) (*http.Response, error) {
	return c.send(ctx, op, http.MethodGet, path, q, nil, "", archive)
}

// send is do for any method, with an optional body of content type ctype.
func (c *Client) send(ctx context.Context, op, method, path string, q url.Values, body io.Reader, ctype string, archive bool) (*http.Response, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, vs := range c.ep.Headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if c.ep.SessionKey != "" && strings.HasPrefix(path, "/api/") {
		req.Header.Set(SessionKeyHeader, c.ep.SessionKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", op, ctx.Err())
		}
		return nil, &Error{Op: op, Class: ClassRetryable, Err: stripURL(err)}
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	e := &Error{Op: op, Status: resp.StatusCode, Class: classify(resp.StatusCode, archive),
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), c.now())}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	e.Detail = detailText(raw)
	return nil, e
}

// stripURL drops the request URL from a transport error: a proxy URL may
// carry a token in its query.
func stripURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// detailText reads {"detail": "..."} or FastAPI's {"detail": [...]}.
func detailText(raw []byte) string {
	var body struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(raw, &body) != nil || len(body.Detail) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(body.Detail, &s) == nil {
		return cut(s)
	}
	return cut(string(body.Detail))
}

func cut(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func (c *Client) getJSON(ctx context.Context, op, path string, q url.Values, v any) error {
	resp, err := c.do(ctx, op, path, q, false)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSON)).Decode(v); err != nil {
		return &Error{Op: op, Status: resp.StatusCode, Class: ClassRetryable,
			Err: fmt.Errorf("decode answer: %w", err)}
	}
	return nil
}

// ServerInfo is the part of GET /server_info companion reads.
type ServerInfo struct {
	// Uptime and IdleTime are seconds; upstream sends whole numbers that
	// may or may not carry ".0".
	Uptime   float64 `json:"uptime"`
	IdleTime float64 `json:"idle_time"`
	Title    string  `json:"title"`
	Version  string  `json:"version"`
	// RuntimeIdleTimeoutSeconds is nil when the server has none.
	RuntimeIdleTimeoutSeconds *float64 `json:"runtime_idle_timeout_seconds"`
	Capabilities              []string `json:"capabilities"`
}

// Idle is IdleTime as a duration.
func (s ServerInfo) Idle() time.Duration {
	return time.Duration(s.IdleTime * float64(time.Second))
}

// ServerInfo calls GET /server_info (no auth; not activity).
func (c *Client) ServerInfo(ctx context.Context) (ServerInfo, error) {
	var si ServerInfo
	err := c.getJSON(ctx, "GET /server_info", "/server_info", nil, &si)
	return si, err
}

// Conversation is the part of ConversationInfo companion reads.
type Conversation struct {
	// ID is as sent (dashed upstream); HexID is its 32-hex form.
	ID              string            `json:"id"`
	Title           *string           `json:"title"`
	Tags            map[string]string `json:"tags"`
	ExecutionStatus string            `json:"execution_status"`
	CreatedAt       time.Time         `json:"created_at"`
	UpdatedAt       time.Time         `json:"updated_at"`
}

// HexID is the id without dashes, lower case: the form the trajectory zip
// is named by and next_page_id uses.
func (c Conversation) HexID() string { return hexID(c.ID) }

func hexID(id string) string { return strings.ToLower(strings.ReplaceAll(id, "-", "")) }

// SearchOptions are GET /api/conversations/search's parameters; zero
// values are left to the server's defaults.
type SearchOptions struct {
	PageID    string
	Limit     int    // 1..100
	Status    string // an execution status
	SortOrder string // CREATED_AT, UPDATED_AT, CREATED_AT_DESC, UPDATED_AT_DESC
}

// Page is one search answer. NextPageID is "" on the last page.
type Page struct {
	Items      []Conversation `json:"items"`
	NextPageID string         `json:"-"`
}

// SearchConversations fetches one page (a read: not activity).
func (c *Client) SearchConversations(ctx context.Context, o SearchOptions) (Page, error) {
	if o.Limit < 0 || o.Limit > 100 {
		return Page{}, fmt.Errorf("search conversations: limit %d is outside 1..100", o.Limit)
	}
	q := url.Values{}
	if o.PageID != "" {
		q.Set("page_id", o.PageID)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if o.SortOrder != "" {
		q.Set("sort_order", o.SortOrder)
	}
	var raw struct {
		Items      []Conversation `json:"items"`
		NextPageID *string        `json:"next_page_id"`
	}
	if err := c.getJSON(ctx, "GET /api/conversations/search", "/api/conversations/search", q, &raw); err != nil {
		return Page{}, err
	}
	p := Page{Items: raw.Items}
	if raw.NextPageID != nil {
		p.NextPageID = *raw.NextPageID
	}
	return p, nil
}

// maxPages bounds AllConversations against a server whose paging never
// ends (100 per page: a million conversations).
const maxPages = 10000

// AllConversations follows next_page_id to the end, oldest first. A page
// starts at its page id (upstream) or after it (the other reading); items
// seen before are dropped, so either way each conversation appears once. A
// page id that repeats is an error, not a loop.
func (c *Client) AllConversations(ctx context.Context) ([]Conversation, error) {
	var out []Conversation
	seen := map[string]bool{}
	pages := map[string]bool{}
	o := SearchOptions{Limit: 100, SortOrder: "CREATED_AT"}
	for range maxPages {
		p, err := c.SearchConversations(ctx, o)
		if err != nil {
			return nil, err
		}
		for _, it := range p.Items {
			if h := it.HexID(); !seen[h] {
				seen[h] = true
				out = append(out, it)
			}
		}
		if p.NextPageID == "" {
			return out, nil
		}
		key := hexID(p.NextPageID)
		if pages[key] {
			return nil, &Error{Op: "GET /api/conversations/search", Status: http.StatusOK, Class: ClassRetryable,
				Err: fmt.Errorf("next_page_id %q repeats: paging does not advance", p.NextPageID)}
		}
		pages[key] = true
		o.PageID = p.NextPageID
	}
	return nil, fmt.Errorf("search conversations: more than %d pages", maxPages)
}

// Download is a streamed 200 answer. The caller must close Body.
type Download struct {
	Body        io.ReadCloser
	Filename    string // from Content-Disposition, "" when absent
	ContentType string
	// Length is Content-Length, -1 when unknown.
	Length int64

	op string
}

func download(op string, resp *http.Response) Download {
	d := Download{Body: &body{rc: resp.Body, op: op}, ContentType: resp.Header.Get("Content-Type"), Length: resp.ContentLength, op: op}
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		d.Filename = params["filename"]
	}
	return d
}

// DownloadTrajectory streams GET /api/file/download-trajectory/{id}: the
// conversation's zip (secrets redacted by the server). Not activity. id may
// be dashed or 32-hex.
func (c *Client) DownloadTrajectory(ctx context.Context, id string) (Download, error) {
	if id == "" || strings.ContainsAny(id, "/?#%") {
		return Download{}, fmt.Errorf("download trajectory: bad conversation id %q", id)
	}
	resp, err := c.do(ctx, "GET /api/file/download-trajectory", "/api/file/download-trajectory/"+id, nil, false)
	if err != nil {
		return Download{}, err
	}
	return download("GET /api/file/download-trajectory", resp), nil
}

// body turns a failure mid-stream (a reset, a body shorter than its
// Content-Length) into a retryable *Error, so whoever copies it learns the
// class without knowing the transport.
type body struct {
	rc io.ReadCloser
	op string
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		err = &Error{Op: b.op, Status: http.StatusOK, Class: ClassRetryable,
			Err: fmt.Errorf("body cut short: %w", stripURL(err))}
	}
	return n, err
}

func (b *body) Close() error { return b.rc.Close() }
