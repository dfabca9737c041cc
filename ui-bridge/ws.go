package uibridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/canvasapp/companion/core"
)

// Close codes the server ends a stream with (see API.md).
const (
	// CloseGoingAway: the server is shutting down.
	CloseGoingAway = 1001
	// CloseSlowConsumer: the client did not read fast enough and its
	// queue overflowed; it should reconnect with ?since=<last rev>.
	CloseSlowConsumer = 4008
	// CloseResync: the server lost track of the feed's history; the client
	// should reconnect (with ?since, which may answer with a snapshot).
	CloseResync = 4009
	// ClosePongTimeout: the client did not answer a ping in time.
	ClosePongTimeout = 4010
)

// clientReadLimit bounds a message from a client. Clients send nothing in
// v1; whatever they send is read and discarded.
const clientReadLimit = 4 << 10

// client is one WebSocket connection of the stream. The hub appends frames
// to queue (under mu) and pokes wake; the client's writer goroutine takes
// the queue in batches and writes it out.
type client struct {
	owner string

	mu       sync.Mutex
	queue    []*frame
	maxQueue int // largest len(queue) seen, for tests and stats
	closing  *closeReason
	skip     int64 // frames up to this revision were covered by the catch-up

	wake chan struct{} // capacity 1
}

type closeReason struct {
	code   int
	reason string
}

func newClient(owner string) *client {
	return &client{owner: owner, wake: make(chan struct{}, 1)}
}

// push queues fr. It reports false when c takes no more frames: either it
// is closing already, or its queue was full (overflow is then true), in
// which case it is marked for closing as a slow consumer and its queue is
// released, so a client that stops reading holds at most limit frames.
func (c *client) push(fr *frame, limit int) (ok, overflow bool) {
	c.mu.Lock()
	switch {
	case c.closing != nil:
	case len(c.queue) >= limit:
		c.queue = nil
		c.closing = &closeReason{code: CloseSlowConsumer}
		overflow = true
	default:
		c.queue = append(c.queue, fr)
		c.maxQueue = max(c.maxQueue, len(c.queue))
		ok = true
	}
	c.mu.Unlock()
	c.poke()
	return ok, overflow
}

func (c *client) kill(code int, reason string) {
	c.mu.Lock()
	if c.closing == nil {
		c.closing = &closeReason{code: code, reason: reason}
		c.queue = nil
	}
	c.mu.Unlock()
	c.poke()
}

func (c *client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take returns the queued frames, or why the client must close.
func (c *client) take() ([]*frame, *closeReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queue
	c.queue = nil
	return q, c.closing
}

// serveWS is GET /v1/ws.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	since := int64(-1) // none: start with a snapshot
	if q := r.URL.Query(); q.Has("since") {
		n, err := strconv.ParseInt(q.Get("since"), 10, 64)
		if err != nil || n < 0 {
			writeErrorCode(w, http.StatusBadRequest, codeInvalidSince, "since must be a revision number received from this server")
			return
		}
		since = n
	}
	if !isWebSocketUpgrade(r) {
		w.Header().Set("Upgrade", "websocket")
		writeErrorCode(w, http.StatusUpgradeRequired, "websocket_required", "this route is a WebSocket: connect with subprotocol "+Subprotocol)
		return
	}
	if !slices.Contains(offeredSubprotocols(r), Subprotocol) {
		writeErrorCode(w, http.StatusBadRequest, codeSubprotocolRequired, "offer the WebSocket subprotocol "+Subprotocol)
		return
	}
	if !s.track(1) {
		writeErrorCode(w, http.StatusServiceUnavailable, string(core.KindUnavailable), "the server is shutting down")
		return
	}
	defer s.track(-1)
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// Only companion.v1 is ever selected: the bearer entry must not
		// be echoed back.
		Subprotocols: []string{Subprotocol},
		// The gate has already matched Origin against the exact
		// allowlist; the library's host-pattern check would be looser.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
		OnPongReceived:     func(context.Context, []byte) { s.pongs.Add(1) },
	})
	if err != nil {
		return // Accept has answered
	}
	id, _ := IdentityFrom(r.Context())
	s.runClient(conn, newClient(id.Owner), since)
}

// runClient attaches c to the hub, sends the snapshot or catch-up (when
// since >= 0), then relays changes until the connection ends.
func (s *Server) runClient(conn *websocket.Conn, c *client, since int64) {
	// The request's context ends with the handler's hijacked connection in
	// unclear ways; the stream lives on the server's context.
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	s.addConn(conn)
	defer s.removeConn(conn)

	conn.SetReadLimit(clientReadLimit)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			if _, _, err := conn.Read(ctx); err != nil {
				return
			}
		}
	}()
	defer func() { conn.CloseNow(); <-readerDone }()

	// Let the hub catch up with writes that completed before the client
	// connected, so its first message reflects them.
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	s.hub.waitFor(wctx, s.svc.Feed().Rev())
	wcancel()

	var catchup []*frame
	var snapshot []*entry
	var rev int64
	attached := false
	if since >= 0 {
		var err error
		catchup, attached, err = s.hub.attachSince(ctx, c, since)
		if err != nil {
			s.closeConn(conn, closeFor(err))
			return
		}
	}
	if !attached {
		var err error
		rev, snapshot, err = s.hub.attachSnapshot(c)
		if err != nil {
			s.closeConn(conn, closeFor(err))
			return
		}
	}
	defer s.hub.detach(c)
	defer s.noteQueue(c)

	last := since
	if !attached {
		if err := s.writeSnapshot(ctx, conn, rev, snapshot); err != nil {
			return
		}
		snapshot = nil // let the references go
		last = rev
	}
	for _, fr := range catchup {
		if err := s.writeFrame(ctx, conn, fr); err != nil {
			return
		}
	}
	if attached {
		// Everything up to skip was covered, including other owners'
		// changes that were filtered out.
		last = max(since, c.skip)
	}
	catchup = nil

	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	var pinging atomic.Bool
	pongMissed := make(chan struct{}, 1)
	for {
		select {
		case <-c.wake:
			batch, closing := c.take()
			if closing != nil {
				if closing.code == CloseSlowConsumer {
					closing.reason = fmt.Sprintf("slow consumer: reconnect with ?since=%d", last)
					s.log.Info("stream client closed: it did not keep up", "queue_limit", s.cfg.ClientQueue, "rev", last)
				}
				s.closeConn(conn, *closing)
				return
			}
			for _, fr := range batch {
				if fr.event {
					if err := s.writeFrame(ctx, conn, fr); err != nil {
						return
					}
					continue
				}
				if fr.rev <= c.skip {
					continue
				}
				if err := s.writeFrame(ctx, conn, fr); err != nil {
					return
				}
				last = fr.rev
			}
		case <-ping.C:
			if !pinging.CompareAndSwap(false, true) {
				continue
			}
			go func() {
				defer pinging.Store(false)
				pctx, cancel := context.WithTimeout(ctx, s.cfg.PongTimeout)
				defer cancel()
				if err := conn.Ping(pctx); err != nil && ctx.Err() == nil {
					select {
					case pongMissed <- struct{}{}:
					default:
					}
				}
			}()
		case <-pongMissed:
			s.pongMissed.Add(1)
			s.log.Info("stream client closed: no pong in time", "timeout", s.cfg.PongTimeout)
			s.closeConn(conn, closeReason{code: ClosePongTimeout, reason: "no pong in time"})
			return
		case <-readerDone:
			return
		}
	}
}

// noteQueue records the longest queue c had.
func (s *Server) noteQueue(c *client) {
	c.mu.Lock()
	n := int64(c.maxQueue)
	c.mu.Unlock()
	for {
		old := s.maxQueue.Load()
		if n <= old || s.maxQueue.CompareAndSwap(old, n) {
			return
		}
	}
}

func closeFor(err error) closeReason {
	if errors.Is(err, errHubClosed) {
		return closeReason{code: CloseGoingAway, reason: "server shutting down"}
	}
	return closeReason{code: int(websocket.StatusInternalError), reason: "internal error"}
}

func (s *Server) writeFrame(ctx context.Context, conn *websocket.Conn, fr *frame) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	return conn.Write(ctx, websocket.MessageText, fr.data)
}

// snapshotBufs holds the buffers a snapshot is assembled in on its way to
// the connection, so an idle client keeps none.
var snapshotBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}

// writeSnapshot streams a snapshot message made of the cached encodings.
func (s *Server) writeSnapshot(ctx context.Context, conn *websocket.Conn, rev int64, items []*entry) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	mw, err := conn.Writer(ctx, websocket.MessageText)
	if err != nil {
		return err
	}
	if err := writeSnapshotTo(mw, rev, s.cfg.Now(), items); err != nil {
		return err
	}
	return mw.Close()
}

// writeSnapshotTo writes a snapshot message to w through a pooled buffer,
// so that the message is sent in large frames and an idle client keeps
// no buffer.
func writeSnapshotTo(w io.Writer, rev int64, now time.Time, items []*entry) error {
	bw := snapshotBufs.Get().(*bufio.Writer)
	bw.Reset(w)
	defer func() { bw.Reset(nil); snapshotBufs.Put(bw) }()
	bw.Write(appendHead(make([]byte, 0, 96), "snapshot", rev, now))
	bw.WriteString(`,"workspaces":[`)
	for i, e := range items {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.Write(e.json)
	}
	bw.WriteString("]}")
	return bw.Flush()
}

// closeConn sends a close frame and ends the connection. A peer that does
// not complete the close handshake is cut off by the library's timeouts.
func (s *Server) closeConn(conn *websocket.Conn, cr closeReason) {
	conn.Close(websocket.StatusCode(cr.code), cr.reason)
}
