package agentproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
)

// retryBody is the largest request body kept so that a request that met
// a rotated endpoint can be sent again; a larger one streams and is not
// retried (the next request finds the new endpoint).
const retryBody = 64 << 10

// hop is one proxied HTTP request: who asked, for what, and the access
// it was sent with.
type hop struct {
	p         *Proxy
	owner, id string
	// rest is the path below the agent-server's root; prefix is the
	// caller's path up to it (where the proxy serves that root).
	rest, prefix string
	acc          core.AgentAccess
}

func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request, owner, id, rest string) {
	acc, err := p.cfg.Target(r.Context(), owner, id, false)
	if err != nil {
		p.cfg.WriteError(w, r, err)
		return
	}
	if r.ContentLength > p.cfg.MaxBody {
		p.cfg.WriteError(w, r, tooLarge(p.cfg.MaxBody))
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, p.cfg.MaxBody)
		if r.ContentLength >= 0 && r.ContentLength <= retryBody {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				p.cfg.WriteError(w, r, bodyError(err, p.cfg.MaxBody))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		}
	}
	h := &hop{p: p, owner: owner, id: id, rest: rest, prefix: strings.TrimSuffix(r.URL.EscapedPath(), rest), acc: acc}
	rp := &httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { h.rewrite(pr.Out) },
		Transport:      rotating{h: h},
		ModifyResponse: h.scrub,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				p.cfg.WriteError(w, r, tooLarge(p.cfg.MaxBody))
				return
			}
			if r.Context().Err() != nil {
				return // the caller went away
			}
			p.cfg.WriteError(w, r, unreachable(err))
		},
	}
	rp.ServeHTTP(w, r)
}

// rewrite points out at the hop's agent-server and attaches its
// credentials, after removing the caller's.
func (h *hop) rewrite(out *http.Request) {
	u, err := targetURL(h.acc.Endpoint.URL, h.rest, out.URL.RawQuery)
	if err != nil {
		// The transport refuses a request without a host.
		out.URL = &url.URL{Scheme: "http"}
		return
	}
	out.URL, out.Host = u, ""
	stripCaller(out.Header, h.p.cfg.OwnCookies, h.p.cfg.OwnSubprotocol)
	for k, v := range h.acc.Endpoint.Headers {
		out.Header.Set(k, v)
	}
	if h.acc.Key != "" {
		out.Header.Set(agentclient.SessionKeyHeader, h.acc.Key)
	}
}

// rotating sends a hop's request and, when the answer says the endpoint
// may have moved (see moved), resolves it afresh and, if it did move,
// sends the request once more to the new one.
type rotating struct{ h *hop }

func (t rotating) RoundTrip(req *http.Request) (*http.Response, error) {
	h := t.h
	resp, err := h.p.cfg.Transport.RoundTrip(req)
	if !moved(resp, err) || !h.p.fresh.allow(h.id, time.Now()) {
		return resp, err
	}
	acc, rerr := h.p.cfg.Target(req.Context(), h.owner, h.id, true)
	if rerr != nil || sameAccess(acc, h.acc) {
		return resp, err
	}
	h.p.cfg.Log.Info("agent-server endpoint rotated; request sent again", "workspace", h.id)
	h.acc = acc
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return resp, err // a streamed body is spent: the next request goes to the new endpoint
	}
	if resp != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	again := req.Clone(req.Context())
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	h.rewrite(again)
	return h.p.cfg.Transport.RoundTrip(again)
}

// moved says whether an answer may come from an endpoint the provider
// rotated: no connection, or a refusal a provider's proxy gives for a
// stale token or a revoked hostname.
func moved(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusBadGateway, http.StatusServiceUnavailable:
		return true
	}
	return false
}

func sameAccess(a, b core.AgentAccess) bool {
	if a.Endpoint.URL != b.Endpoint.URL || a.Key != b.Key || len(a.Endpoint.Headers) != len(b.Endpoint.Headers) {
		return false
	}
	for k, v := range a.Endpoint.Headers {
		if b.Endpoint.Headers[k] != v {
			return false
		}
	}
	return true
}

// freshLimit lets a workspace's endpoint be resolved afresh at most once
// every freshEvery: an agent-server's own 404s must not become a
// provider API call each.
type freshLimit struct {
	mu   sync.Mutex
	last map[string]time.Time
}

const freshEvery = 5 * time.Second

func (f *freshLimit) allow(id string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		f.last = map[string]time.Time{}
	}
	if t, ok := f.last[id]; ok && now.Sub(t) < freshEvery {
		return false
	}
	f.last[id] = now
	return true
}

// scrub drops every answer header that carries an attached secret, and
// turns a redirect to the box into one to the proxy.
func (h *hop) scrub(resp *http.Response) error {
	secrets := h.secrets()
	for k, vs := range resp.Header {
		for _, v := range vs {
			if containsAny(v, secrets) {
				resp.Header.Del(k)
				break
			}
		}
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		// Where the box sends the caller, as a URL, mapped to the proxy's
		// path; anywhere else is never passed on (it would name the box's
		// host, which may carry a token).
		resp.Header.Del("Location")
		if u, err := resp.Request.URL.Parse(loc); err == nil {
			base := strings.TrimSuffix(h.acc.Endpoint.URL, "/")
			if rest, ok := strings.CutPrefix(u.String(), base); ok && (rest == "" || rest[0] == '/' || rest[0] == '?') {
				resp.Header.Set("Location", h.prefix+rest)
			}
		}
	}
	return nil
}

// secrets are the values the hop attached: they must never reach the
// caller.
func (h *hop) secrets() []string {
	out := make([]string, 0, len(h.acc.Endpoint.Headers)+1)
	if h.acc.Key != "" {
		out = append(out, h.acc.Key)
	}
	for _, v := range h.acc.Endpoint.Headers {
		v = strings.TrimPrefix(v, "Bearer ")
		if len(v) >= 8 {
			out = append(out, v)
		}
	}
	return out
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if sub != "" && strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// stripCaller removes the caller's credentials for companion from h.
func stripCaller(h http.Header, cookies []string, own func(string) bool) {
	h.Del("Authorization")
	h.Del(agentclient.SessionKeyHeader)
	h.Del("Forwarded")
	if len(cookies) > 0 && h.Get("Cookie") != "" {
		r := http.Request{Header: http.Header{"Cookie": h.Values("Cookie")}}
		var keep []string
		for _, c := range r.Cookies() {
			drop := false
			for _, name := range cookies {
				drop = drop || c.Name == name
			}
			if !drop {
				keep = append(keep, c.String())
			}
		}
		h.Del("Cookie")
		if len(keep) > 0 {
			h.Set("Cookie", strings.Join(keep, "; "))
		}
	}
	if vs := h.Values("Sec-WebSocket-Protocol"); len(vs) > 0 {
		var keep []string
		for _, v := range vs {
			for _, e := range strings.Split(v, ",") {
				if e = strings.TrimSpace(e); e != "" && !own(e) {
					keep = append(keep, e)
				}
			}
		}
		h.Del("Sec-WebSocket-Protocol")
		if len(keep) > 0 {
			h.Set("Sec-WebSocket-Protocol", strings.Join(keep, ", "))
		}
	}
}

// BodyTooLargeError is a request body over Config.MaxBody: answer 413.
type BodyTooLargeError struct{ Limit int64 }

func (e *BodyTooLargeError) Error() string {
	return fmt.Sprintf("the request body is larger than the %d bytes companion forwards to an agent-server", e.Limit)
}

func tooLarge(max int64) error { return &BodyTooLargeError{Limit: max} }

func bodyError(err error, max int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(max)
	}
	return core.Errorf(core.KindInvalid, "reading the request body: %v", err)
}

// unreachable is the error of a box that did not answer; its text never
// names the box's URL (a provider's URL may carry a token).
func unreachable(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &core.Error{Kind: core.KindUnavailable, Message: "the workspace's agent-server did not answer: " + err.Error() +
		"; if the box was paused, connect again (POST /v1/workspaces/{id}/connect)"}
}
