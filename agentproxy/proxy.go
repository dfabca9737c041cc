// Package agentproxy forwards a person's HTTP and WebSocket traffic to
// the agent-server in one of their workspaces, so that front ends reach
// every agent through companion alone: companion attaches the provider
// proxy's headers (a Daytona preview token, an E2B traffic token, a
// DigitalOcean bearer) and the box's X-Session-API-Key itself, and the
// caller never learns where the box is or its key.
//
// Guarantees:
//   - The target is only ever the endpoint the workspace's adapter
//     reported, reached through the dialer the caller configures (the
//     same guard as every other agent-server request). The caller's path
//     is a path below it, never with ".." in it; its Host and forwarding
//     headers are not passed on.
//   - The caller's own credentials (Authorization, X-Session-API-Key,
//     companion's cookies, companion's WebSocket subprotocol entries) are
//     stripped before forwarding, and an answer's header that carries any
//     of the attached secrets is dropped before it reaches the caller.
//   - Bodies stream both ways with back-pressure (httputil.ReverseProxy,
//     and gorilla/websocket message by message): nothing is held whole.
//   - An endpoint the provider rotated (a new token or hostname after a
//     start) is resolved again once, transparently, when a request meets
//     it.
//   - One owner's open requests and sockets are bounded, and a box that
//     goes away mid-stream ends the caller's socket with a close reason.
package agentproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
)

// Defaults of Config.
const (
	DefaultMaxConnsPerOwner = 64
	DefaultMaxBody          = 1 << 30
	// DefaultMaxMessage bounds one WebSocket message from the caller.
	DefaultMaxMessage = 64 << 20
)

// Config configures a Proxy. Target, Transport and DialContext are
// required.
type Config struct {
	// Target resolves owner's workspace id to its agent-server; fresh asks
	// the adapter again rather than a cache (core.Service.AgentTarget).
	Target func(ctx context.Context, owner, id string, fresh bool) (core.AgentAccess, error)
	// Transport carries HTTP requests to boxes, and DialContext dials them
	// for WebSockets: both with the guard every agent-server request
	// goes through.
	Transport   http.RoundTripper
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// WriteError answers a request with err in the API's error shape.
	WriteError func(w http.ResponseWriter, r *http.Request, err error)
	// MaxConnsPerOwner bounds one owner's open requests and sockets; 0
	// means DefaultMaxConnsPerOwner.
	MaxConnsPerOwner int
	// MaxBody bounds a request body; 0 means DefaultMaxBody.
	MaxBody int64
	// MaxMessage bounds a WebSocket message from the caller; 0 means
	// DefaultMaxMessage.
	MaxMessage int64
	// OwnCookies are the names of companion's own cookies, never passed
	// on.
	OwnCookies []string
	// OwnSubprotocol reports whether a WebSocket subprotocol entry is
	// companion's own (its bearer entry), never passed on.
	OwnSubprotocol func(p string) bool
	// AnswerSubprotocol is selected for a caller that offered it when the
	// agent-server selected none: a browser that offered any subprotocol
	// (the bearer entry is one) fails a handshake that selects none.
	AnswerSubprotocol string
	// Counts, when set, is told a workspace's number of open connections
	// whenever it changes.
	Counts func(owner, id string, n int)
	Log    *slog.Logger
}

// Proxy forwards requests to workspaces' agent-servers. Make one with
// New; it is safe for concurrent use.
type Proxy struct {
	cfg Config

	mu      sync.Mutex
	byWS    map[string]int // open connections per workspace
	byOwner map[string]int
	sockets map[*relay]struct{}
	pinging bool // the keepalive goroutine runs
	closed  bool
	fresh   freshLimit
}

// New returns a Proxy.
func New(cfg Config) *Proxy {
	if cfg.MaxConnsPerOwner <= 0 {
		cfg.MaxConnsPerOwner = DefaultMaxConnsPerOwner
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.OwnSubprotocol == nil {
		cfg.OwnSubprotocol = func(string) bool { return false }
	}
	return &Proxy{cfg: cfg, byWS: map[string]int{}, byOwner: map[string]int{}, sockets: map[*relay]struct{}{}}
}

// Serve forwards r to the agent-server of owner's workspace id, at rest
// (the escaped path below the agent-server's root, starting with "/").
func (p *Proxy) Serve(w http.ResponseWriter, r *http.Request, owner, id, rest string) {
	if err := checkRest(rest); err != nil {
		p.cfg.WriteError(w, r, err)
		return
	}
	done, err := p.open(owner, id)
	if err != nil {
		p.cfg.WriteError(w, r, err)
		return
	}
	defer done()
	if r.Method == http.MethodGet && websocket.IsWebSocketUpgrade(r) {
		p.serveWebSocket(w, r, owner, id, rest)
		return
	}
	p.serveHTTP(w, r, owner, id, rest)
}

// Connections is the number of open connections to workspace id's
// agent-server through this proxy.
func (p *Proxy) Connections(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byWS[id]
}

// Close ends every relayed WebSocket with 1001 (going away) and refuses
// new connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	list := make([]*relay, 0, len(p.sockets))
	for r := range p.sockets {
		list = append(list, r)
	}
	p.mu.Unlock()
	for _, r := range list {
		r.shutdown()
	}
}

// open counts a connection, refusing one over the owner's bound.
func (p *Proxy) open(owner, id string) (func(), error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, core.Errorf(core.KindUnavailable, "companion is shutting down")
	}
	if p.byOwner[owner] >= p.cfg.MaxConnsPerOwner {
		p.mu.Unlock()
		return nil, &core.Error{Kind: core.KindRateLimited, Message: fmt.Sprintf(
			"you have %d open agent connections, the most companion allows; close some and try again", p.cfg.MaxConnsPerOwner)}
	}
	p.byOwner[owner]++
	p.byWS[id]++
	n := p.byWS[id]
	p.mu.Unlock()
	p.report(owner, id, n)
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.byOwner[owner]--
			if p.byOwner[owner] == 0 {
				delete(p.byOwner, owner)
			}
			p.byWS[id]--
			n := p.byWS[id]
			if n == 0 {
				delete(p.byWS, id)
			}
			p.mu.Unlock()
			p.report(owner, id, n)
		})
	}, nil
}

func (p *Proxy) report(owner, id string, n int) {
	if p.cfg.Counts != nil {
		p.cfg.Counts(owner, id, n)
	}
}

// checkRest refuses a path that could leave the agent-server's root: a
// ".." segment, escaped or not, or anything but an absolute path.
func checkRest(rest string) error {
	if !strings.HasPrefix(rest, "/") {
		return core.Errorf(core.KindInvalid, "the agent path must start with /")
	}
	un, err := url.PathUnescape(rest)
	if err != nil {
		return core.Errorf(core.KindInvalid, "the agent path is not a valid escaped path: %v", err)
	}
	for _, seg := range strings.Split(un, "/") {
		if seg == ".." || seg == "." {
			return core.Errorf(core.KindInvalid, "the agent path must not hold %q segments", seg)
		}
	}
	if strings.Contains(un, "\\") || strings.ContainsAny(un, "\x00\r\n") {
		return core.Errorf(core.KindInvalid, "the agent path holds characters no agent-server route has")
	}
	return nil
}

// targetURL is the agent-server URL of rest (escaped, checked by
// checkRest) and query, below base. Only base's scheme and host are ever
// dialled.
func targetURL(base, rest, rawQuery string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("the provider reported an agent-server endpoint that is not an http(s) URL")
	}
	raw := strings.TrimSuffix(u.EscapedPath(), "/") + rest
	p, err := url.PathUnescape(raw)
	if err != nil {
		return nil, err
	}
	u.Path, u.RawPath = p, raw
	u.RawQuery, u.Fragment = rawQuery, ""
	return u, nil
}
