package agentproxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
)

// WebSocket keepalive: each side of a relay is pinged every pingEvery and
// must answer (any frame) within deadAfter, so a box that dies without a
// close (a kill -9, a dropped network) ends the caller's socket with a
// reason instead of leaving it hanging.
const (
	pingEvery = 20 * time.Second
	deadAfter = 45 * time.Second
	writeWait = 10 * time.Second
)

// CloseAgentGone is the close code the proxy ends a caller's socket with
// when the box's side did not close it properly (see API.md).
const (
	// CloseAgentGone: the agent-server's connection ended without a close
	// (the box stopped or died, the network dropped).
	CloseAgentGone = 4013
)

// serveWebSocket dials the agent-server's socket first and, once it
// accepted, accepts the caller's with the subprotocol the agent-server
// chose; then it relays messages both ways until either side closes.
func (p *Proxy) serveWebSocket(w http.ResponseWriter, r *http.Request, owner, id, rest string) {
	acc, err := p.cfg.Target(r.Context(), owner, id, false)
	if err != nil {
		p.cfg.WriteError(w, r, err)
		return
	}
	var offered []string
	for _, s := range websocket.Subprotocols(r) {
		if !p.cfg.OwnSubprotocol(s) {
			offered = append(offered, s)
		}
	}
	up, resp, err := p.dial(r, acc, rest, offered)
	if moved(resp, err) && p.fresh.allow(id, time.Now()) {
		if fresh, ferr := p.cfg.Target(r.Context(), owner, id, true); ferr == nil && !sameAccess(fresh, acc) {
			p.cfg.Log.Info("agent-server endpoint rotated; socket dialled again", "workspace", id)
			up, resp, err = p.dial(r, fresh, rest, offered)
		}
	}
	if err != nil {
		if resp != nil {
			p.cfg.WriteError(w, r, &core.Error{Kind: core.KindUnavailable, Message: fmt.Sprintf(
				"the workspace's agent-server refused the WebSocket (HTTP %d)", resp.StatusCode)})
			return
		}
		p.cfg.WriteError(w, r, unreachable(err))
		return
	}
	upg := websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		WriteBufferPool:  writeBuffers,
		CheckOrigin:      func(*http.Request) bool { return true }, // the gate checked Origin
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			p.cfg.WriteError(w, r, core.Errorf(core.KindInvalid, "WebSocket handshake failed: %v", reason))
		},
	}
	if s := up.Subprotocol(); s != "" {
		upg.Subprotocols = []string{s}
	} else if p.cfg.AnswerSubprotocol != "" {
		upg.Subprotocols = []string{p.cfg.AnswerSubprotocol}
	}
	down, err := upg.Upgrade(w, r, nil)
	if err != nil {
		up.Close()
		return
	}
	rl := &relay{p: p, down: down, up: up, done: make(chan struct{})}
	if !p.track(rl) {
		rl.shutdown()
		down.Close()
		up.Close()
		return
	}
	defer p.untrack(rl)
	rl.run()
}

// dial opens the agent-server's socket with the provider's headers and
// the box's key (the agent-server accepts the key as a header on the
// handshake; the caller never has it).
func (p *Proxy) dial(r *http.Request, acc core.AgentAccess, rest string, subprotocols []string) (*websocket.Conn, *http.Response, error) {
	u, err := targetURL(acc.Endpoint.URL, rest, r.URL.RawQuery)
	if err != nil {
		return nil, nil, err
	}
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	h := http.Header{}
	for k, v := range acc.Endpoint.Headers {
		h.Set(k, v)
	}
	if acc.Key != "" {
		h.Set(agentclient.SessionKeyHeader, acc.Key)
	}
	d := websocket.Dialer{NetDialContext: p.cfg.DialContext, HandshakeTimeout: 15 * time.Second, Subprotocols: subprotocols,
		WriteBufferPool: writeBuffers}
	c, resp, err := d.DialContext(r.Context(), u.String(), h)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil && resp == nil {
		err = unreachableCause(err)
	}
	return c, resp, err
}

// unreachableCause keeps a dial error's cause without the URL.
func unreachableCause(err error) error {
	var ne interface{ Unwrap() error }
	if errors.As(err, &ne) && ne.Unwrap() != nil {
		return ne.Unwrap()
	}
	return err
}

func (p *Proxy) track(r *relay) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.sockets[r] = struct{}{}
	if !p.pinging {
		p.pinging = true
		go p.keepalive()
	}
	return true
}

// keepalive pings every open relay every pingEvery, one goroutine for
// all of them (a goroutine per socket would cost its stack), until none
// is left.
func (p *Proxy) keepalive() {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for range t.C {
		p.mu.Lock()
		if len(p.sockets) == 0 {
			p.pinging = false
			p.mu.Unlock()
			return
		}
		list := make([]*relay, 0, len(p.sockets))
		for r := range p.sockets {
			list = append(list, r)
		}
		p.mu.Unlock()
		for _, r := range list {
			r.ping()
		}
	}
}

func (p *Proxy) untrack(r *relay) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.sockets, r)
}

// writeBuffers lends write buffers to sockets for the length of a
// message: an idle socket holds none.
var writeBuffers = &sync.Pool{}

// copyBuffers are the buffers a pump copies a message through.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// relay is one caller's socket (down) joined to the agent-server's (up).
// Each side has one data writer (the pump from the other side); pings
// and closes go through WriteControl, which gorilla lets any goroutine
// call.
type relay struct {
	p        *Proxy
	down, up *websocket.Conn
	once     sync.Once
	done     chan struct{}
}

func (rl *relay) run() {
	rl.down.SetReadLimit(rl.p.cfg.MaxMessage)
	for _, c := range []*websocket.Conn{rl.down, rl.up} {
		c.SetReadDeadline(time.Now().Add(deadAfter))
		c.SetPongHandler(func(string) error { return c.SetReadDeadline(time.Now().Add(deadAfter)) })
	}
	var wg sync.WaitGroup
	wg.Go(func() { rl.pump(rl.up, rl.down, true) })
	rl.pump(rl.down, rl.up, false)
	wg.Wait()
	rl.down.Close()
	rl.up.Close()
}

// pump copies messages from src to dst, one at a time and streaming
// (NextReader into NextWriter: a large message is never held whole),
// until src ends; then it closes both sides as src's end says.
func (rl *relay) pump(src, dst *websocket.Conn, fromAgent bool) {
	for {
		typ, r, err := src.NextReader()
		if err != nil {
			rl.end(err, fromAgent)
			return
		}
		w, err := dst.NextWriter(typ)
		if err == nil {
			buf := copyBuffers.Get().(*[]byte)
			_, err = io.CopyBuffer(deadlines{w: w, dst: dst, src: src}, deadlines{r: r, src: src}, *buf)
			copyBuffers.Put(buf)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			rl.end(err, !fromAgent)
			return
		}
	}
}

// deadlines moves the read deadline of src and the write deadline of dst
// on as a message streams, so a long message is not cut by them while a
// silent peer still is.
type deadlines struct {
	r        io.Reader
	w        io.Writer
	src, dst *websocket.Conn
}

func (d deadlines) Read(b []byte) (int, error) {
	d.src.SetReadDeadline(time.Now().Add(deadAfter))
	return d.r.Read(b)
}

func (d deadlines) Write(b []byte) (int, error) {
	d.dst.SetWriteDeadline(time.Now().Add(writeWait))
	return d.w.Write(b)
}

// end closes both sides once: with the code and reason the closing side
// sent, or, when the agent-server's side broke without one, with
// CloseAgentGone and why.
func (rl *relay) end(err error, agentSide bool) {
	rl.once.Do(func() {
		close(rl.done)
		code, reason := websocket.CloseNormalClosure, ""
		var ce *websocket.CloseError
		switch {
		case errors.As(err, &ce) && ce.Code != websocket.CloseNoStatusReceived && ce.Code != websocket.CloseAbnormalClosure:
			code, reason = ce.Code, ce.Text
		case agentSide:
			code, reason = CloseAgentGone, "the workspace's agent-server went away"
			rl.p.cfg.Log.Info("agent socket ended without a close", "err", err)
		default:
			code = websocket.CloseGoingAway
		}
		if agentSide {
			closeSide(rl.down, code, reason)
			closeSide(rl.up, websocket.CloseNormalClosure, "")
		} else {
			closeSide(rl.up, code, reason)
			closeSide(rl.down, code, reason)
		}
		// Unblock the other pump's read.
		rl.down.SetReadDeadline(time.Now())
		rl.up.SetReadDeadline(time.Now())
	})
}

// closeSide sends a close frame (codes a peer may not send become 1011).
func closeSide(c *websocket.Conn, code int, reason string) {
	switch code {
	case websocket.CloseNoStatusReceived, websocket.CloseAbnormalClosure, websocket.CloseTLSHandshake:
		code = websocket.CloseInternalServerErr
	}
	if len(reason) > 120 {
		reason = reason[:120] // a close frame's reason fits in 123 bytes
	}
	c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(writeWait))
}

// ping pings both sides (the proxy's keepalive calls it for every open
// relay).
func (rl *relay) ping() {
	select {
	case <-rl.done:
		return
	default:
	}
	rl.down.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait))
	rl.up.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait))
}

// shutdown ends the relay because companion stops: 1001 to the caller.
func (rl *relay) shutdown() {
	rl.once.Do(func() {
		close(rl.done)
		closeSide(rl.down, websocket.CloseGoingAway, "companion is shutting down")
		closeSide(rl.up, websocket.CloseGoingAway, "")
		rl.down.SetReadDeadline(time.Now())
		rl.up.SetReadDeadline(time.Now())
	})
}
