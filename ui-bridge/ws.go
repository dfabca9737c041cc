package uibridge

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
)

// Close codes the server ends a stream with (see API.md).
const (
	// CloseGoingAway: the server is shutting down.
	CloseGoingAway = websocket.CloseGoingAway
	// CloseSlowConsumer: the client did not read fast enough and its
	// queue overflowed; it should reconnect with ?since=<last rev>.
	CloseSlowConsumer = 4008
	// CloseResync: the server lost track of the feed's history; the client
	// should reconnect (with ?since, which may answer with a snapshot).
	CloseResync = 4009
	// ClosePongTimeout: the client did not answer a ping in time.
	ClosePongTimeout = 4010
	// CloseUserRemoved: an admin removed the stream's user; a reconnect
	// is refused (401).
	CloseUserRemoved = 4011
	// CloseSignedOut: the session or API token the stream was opened
	// with has ended (signed out, revoked, expired, or its user removed
	// elsewhere); a reconnect with it is refused (401).
	CloseSignedOut = 4012
)

// codeWebSocketHandshake answers a handshake the library refuses (no key,
// an unsupported version).
const codeWebSocketHandshake = "websocket_handshake"

// clientReadLimit bounds a message from a client. Clients send nothing in
// v1; whatever they send is read and discarded.
const clientReadLimit = 4 << 10

// Deflate levels (permessage-deflate): snapshots are compressed once for
// many clients, so a slower level costs little: level 4 puts 10k
// workspaces in table form in 462 KB instead of level 1's 549 KB (fewer
// symbols for every client to inflate) for 35-90 ms more deflating per
// snapshot encoding. Deltas are small and keep the fast default.
const (
	snapshotDeflateLevel = 4
	deltaDeflateLevel    = 1 // gorilla/websocket's default
)

// closeWait is how long the server waits for the peer to answer its close
// frame before cutting the connection.
const closeWait = 5 * time.Second

// upgrader is shared by every stream connection. Clients send almost
// nothing, so the read buffer is small; writes of prepared messages go
// straight to the socket, and anything else borrows a buffer from the
// pool, so an idle client holds no write buffer.
var upgrader = websocket.Upgrader{
	HandshakeTimeout: 10 * time.Second,
	ReadBufferSize:   512,
	WriteBufferSize:  16 << 10,
	WriteBufferPool:  writeBuffers,
	// Only companion.v1 is ever selected: the bearer entry must not be
	// echoed back.
	Subprotocols: []string{Subprotocol},
	// The gate has already matched Origin against the exact allowlist
	// (which may name the desktop app's origin, not this host).
	CheckOrigin:       func(*http.Request) bool { return true },
	EnableCompression: true,
	Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
		writeErrorCode(w, status, codeWebSocketHandshake, "WebSocket handshake failed: "+reason.Error())
	},
}

// writeBuffers lends write buffers to connections for the length of one
// message written with a writer of their own. Stream messages are
// prepared and bypass it; it counts loans so tests can check that.
var writeBuffers = &countingPool{}

type countingPool struct {
	pool      sync.Pool
	gets, out atomic.Int64
}

func (p *countingPool) Get() any {
	p.gets.Add(1)
	p.out.Add(1)
	return p.pool.Get()
}

func (p *countingPool) Put(v any) {
	p.out.Add(-1)
	p.pool.Put(v)
}

// client is one WebSocket connection of the stream. The hub appends frames
// to queue (under mu) and pokes wake; the client's writer goroutine takes
// the queue in batches and writes it out. Everything else the writer
// reacts to (a pong, its keepalive timer, the reader ending) is noted here
// too and pokes the same channel: a broadcast wakes 1,000 writers, and a
// receive on one channel costs each of them less than a select over five.
type client struct {
	owner string
	cred  *credential // what it was opened with; nil for the launch token
	table bool        // its snapshots come in table form (?snapshot=table)

	mu         sync.Mutex
	queue      []*frame
	maxQueue   int // largest len(queue) seen, for tests and stats
	closing    *closeReason
	skip       int64  // frames up to this revision were covered by the catch-up
	pong       bool   // a pong arrived
	timerFired uint64 // the generation of the keepalive timer that fired
	readerDone bool   // the reader stopped: the connection is gone

	wake chan struct{} // capacity 1
}

// reuseBatch is the largest batch array a client keeps for its next
// frames.
const reuseBatch = 16

// events is what the writer takes from its client at each wake.
type events struct {
	batch      []*frame
	closing    *closeReason
	pong       bool
	timerFired uint64
	readerDone bool
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

// take returns the queued frames, or why the client must close, and the
// other events since the last take. done is the previous batch, written:
// its array holds the next frames.
func (c *client) take(done []*frame) events {
	clear(done) // the frames may go
	if cap(done) > reuseBatch {
		done = nil // a burst's array is not kept by an idle client
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ev := events{batch: c.queue, closing: c.closing, pong: c.pong, timerFired: c.timerFired, readerDone: c.readerDone}
	if c.closing == nil {
		c.queue = done[:0]
	}
	c.pong = false
	return ev
}

// note records an event for the writer and wakes it.
func (c *client) note(f func()) {
	c.mu.Lock()
	f()
	c.mu.Unlock()
	c.poke()
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
	// Any other value gets the object form, as from a server that predates
	// the table form: a client tells the two apart by the message.
	table := r.URL.Query().Get("snapshot") == SnapshotTable
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
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	id, _ := IdentityFrom(r.Context())
	c := newClient(id.Owner)
	c.cred = id.cred
	c.table = table
	s.runClient(conn, c, since)
}

// runClient attaches c to the hub, sends the snapshot or catch-up (when
// since >= 0), then relays changes until the connection ends.
func (s *Server) runClient(conn *websocket.Conn, c *client, since int64) {
	s.addConn(conn)
	defer s.removeConn(conn)

	conn.SetPongHandler(func(string) error {
		s.pongs.Add(1)
		c.note(func() { c.pong = true })
		return nil
	})
	conn.SetReadLimit(clientReadLimit)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer c.note(func() { c.readerDone = true })
		for {
			// Whatever a client sends is read (so the size limit holds
			// across fragments) and discarded.
			_, r, err := conn.NextReader()
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, r); err != nil {
				return
			}
		}
	}()
	defer func() { conn.Close(); <-readerDone }()

	// Let the hub catch up with writes that completed before the client
	// connected, so its first message reflects them.
	s.hub.waitForTimeout(s.svc.Feed().Rev(), 2*time.Second)

	var catchup []*frame
	var snap *snapshot
	attached := false
	if since >= 0 {
		var err error
		catchup, attached, err = s.hub.attachSince(s.ctx, c, since)
		if err != nil {
			s.closeConn(conn, closeFor(err), readerDone)
			return
		}
	}
	if !attached {
		var err error
		snap, err = s.hub.attachSnapshot(c)
		if err != nil {
			s.closeConn(conn, closeFor(err), readerDone)
			return
		}
	}
	defer s.hub.detach(c)
	defer s.noteQueue(c)

	last := since
	if !attached {
		pm, err := snap.message()
		if err != nil {
			s.log.Error("stream snapshot could not be prepared", "err", err)
			s.closeConn(conn, closeReason{code: websocket.CloseInternalServerErr, reason: "internal error"}, readerDone)
			return
		}
		conn.SetCompressionLevel(snapshotDeflateLevel)
		err = s.write(conn, pm)
		conn.SetCompressionLevel(deltaDeflateLevel)
		if err != nil {
			return
		}
		last = snap.rev
		snap = nil // let the reference go
	}
	for _, fr := range catchup {
		if err := s.write(conn, fr.pm); err != nil {
			return
		}
	}
	if attached {
		// Everything up to skip was covered, including other owners'
		// changes that were filtered out.
		last = max(since, c.skip)
	}
	catchup = nil
	// The agent connections open now: the stream carries their changes
	// from here on.
	for id, n := range s.agentCounts.of(c.owner) {
		if err := s.write(conn, prepare(agentFrame(s.cfg.Now(), id, n))); err != nil {
			return
		}
	}

	s.relay(conn, c, last, readerDone)
}

// relay writes c's queued frames as the hub queues them, pings, and closes
// the connection when the hub, the keepalive or the reader says so. A
// broadcast wakes every client's goroutine here, and at 1,000 clients
// the cache misses of resuming them are a good part of its cost, so the
// loop keeps few locals and leaves what is rare (closing, keepalive) to
// functions of their own.
func (s *Server) relay(conn *websocket.Conn, c *client, last int64, readerDone <-chan struct{}) {
	ka := &keepalive{c: c}
	ka.nextPing = time.Now().Add(s.cfg.PingInterval)
	ka.arm(s.cfg.PingInterval)
	defer ka.stop()
	var batch []*frame
	for range c.wake {
		ev := c.take(batch)
		if ev.closing != nil {
			s.closeClient(conn, *ev.closing, last, readerDone)
			return
		}
		for _, fr := range ev.batch {
			if !fr.event && fr.rev <= c.skip {
				continue
			}
			if err := s.write(conn, fr.pm); err != nil {
				return
			}
			if !fr.event {
				last = fr.rev
			}
		}
		batch = ev.batch
		if (ev.pong || ev.timerFired == ka.gen) && !s.keepAlive(conn, ka, ev, readerDone) {
			return
		}
		if ev.readerDone {
			return
		}
	}
}

// keepalive is a stream connection's ping state: one timer, armed for
// the next ping or, while a ping waits, for its pong's deadline. Each
// arming has its own generation, so a timer that fires as it is re-armed
// is not taken for the new one.
type keepalive struct {
	c        *client
	timer    *time.Timer
	gen      uint64
	nextPing time.Time
	waiting  bool // a ping waits for its pong
}

func (k *keepalive) arm(d time.Duration) {
	if k.timer != nil {
		k.timer.Stop()
	}
	k.gen++
	g, c := k.gen, k.c
	k.timer = time.AfterFunc(d, func() { c.note(func() { c.timerFired = g }) })
}

func (k *keepalive) stop() { k.timer.Stop() }

// keepAlive handles a pong and the keepalive timer; it reports false when
// the connection is done (no pong in time, or the ping failed).
func (s *Server) keepAlive(conn *websocket.Conn, k *keepalive, ev events, readerDone <-chan struct{}) bool {
	if ev.pong && k.waiting { // a pong that arrived unasked does not count
		k.waiting = false
		k.arm(max(0, time.Until(k.nextPing)))
	}
	if ev.timerFired != k.gen {
		return true
	}
	if k.waiting {
		s.pongMissed.Add(1)
		s.log.Info("stream client closed: no pong in time", "timeout", s.cfg.PongTimeout)
		s.closeConn(conn, closeReason{code: ClosePongTimeout, reason: "no pong in time"}, readerDone)
		return false
	}
	if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.cfg.WriteTimeout)); err != nil {
		return false
	}
	k.nextPing = time.Now().Add(s.cfg.PingInterval)
	k.waiting = true
	k.arm(s.cfg.PongTimeout)
	return true
}

// closeClient closes a connection the hub asked to close; a slow
// consumer's reason names the last revision it was sent.
func (s *Server) closeClient(conn *websocket.Conn, cr closeReason, last int64, readerDone <-chan struct{}) {
	if cr.code == CloseSlowConsumer {
		cr.reason = fmt.Sprintf("slow consumer: reconnect with ?since=%d", last)
		s.log.Info("stream client closed: it did not keep up", "queue_limit", s.cfg.ClientQueue, "rev", last)
	}
	s.closeConn(conn, cr, readerDone)
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
	return closeReason{code: websocket.CloseInternalServerErr, reason: "internal error"}
}

// write sends one prepared message under the write deadline. The message
// was framed (and compressed, for connections that negotiated it) once
// for every client.
func (s *Server) write(conn *websocket.Conn, pm *websocket.PreparedMessage) error {
	conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	s.sent.Add(1)
	return conn.WritePreparedMessage(pm)
}

// closeConn sends a close frame and waits a little for the peer's answer
// (readerDone closes when the reader sees it), then ends the connection.
func (s *Server) closeConn(conn *websocket.Conn, cr closeReason, readerDone <-chan struct{}) {
	msg := websocket.FormatCloseMessage(cr.code, cr.reason)
	if err := conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeWait)); err != nil {
		conn.Close()
		return
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-readerDone:
	case <-t.C:
	}
	conn.Close()
}
