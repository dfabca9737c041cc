package main

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// The WebSocket routes (sockets.py), as uvicorn with wsproto serves them.
// docs/agent-server-sockets.md describes them with their sources; in
// short:
//
//   - A handshake whose path or query parameters do not validate, or that
//     names a wrong key in the session_api_key query parameter or the
//     X-Session-API-Key header, is refused with a bare HTTP 403 (FastAPI
//     closes the socket before accepting it; uvicorn answers 403).
//   - Otherwise the socket is accepted. With keys configured and none
//     given in the handshake, the first frame must be
//     {"type":"auth","session_api_key":K} within 10 s, else the socket is
//     closed with 4001 "Authentication failed".
//   - Later {"type":"auth",...} frames are ignored; other frames are
//     messages (events socket) or bash commands (bash socket), and a frame
//     that fails becomes an error event sent back to that socket only.
//   - On shutdown every open socket is closed with 1012, as uvicorn does.

// firstMessageAuthTimeout is upstream's wait for the auth frame.
const firstMessageAuthTimeout = 10 * time.Second

// Close codes upstream sends, besides uvicorn's 1012 on shutdown.
const (
	closeAuthFailed = 4001 // "Authentication failed"
	closeNotFound   = 4004 // "Conversation not found"
)

var upgrader = websocket.Upgrader{
	// Upstream checks no Origin on sockets (its CORS middleware passes
	// them through).
	CheckOrigin: func(*http.Request) bool { return true },
	// uvicorn offers permessage-deflate when the client asks for it.
	EnableCompression: true,
}

// sockets are the open sockets, closed together on shutdown.
type sockets struct {
	mu      sync.Mutex
	closing bool
	live    map[*socket]struct{}
}

// socket is one accepted connection. Frames for it are queued and written
// by its own goroutine, in order, so a publisher never waits on a slow
// client (upstream awaits every subscriber; the emulator does not hold
// its locks that long).
type socket struct {
	conn *websocket.Conn

	mu     sync.Mutex
	frames [][]byte
	wake   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func (sk *socket) deliver(frame []byte) {
	sk.mu.Lock()
	sk.frames = append(sk.frames, frame)
	sk.mu.Unlock()
	select {
	case sk.wake <- struct{}{}:
	default:
	}
}

// writeLoop writes queued frames until the socket is finished or a write
// fails (the client is gone; the read loop then ends too).
func (sk *socket) writeLoop() {
	for {
		select {
		case <-sk.done:
			return
		case <-sk.wake:
		}
		sk.mu.Lock()
		frames := sk.frames
		sk.frames = nil
		sk.mu.Unlock()
		for _, f := range frames {
			if err := sk.conn.WriteMessage(websocket.TextMessage, f); err != nil {
				sk.conn.Close()
				return
			}
		}
	}
}

// closeWith sends a close frame and drops the connection, as uvicorn does
// (it does not wait for the client's close frame).
func (sk *socket) closeWith(code int, reason string) {
	sk.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	sk.conn.Close()
}

// finish stops the writer and drops the connection.
func (sk *socket) finish() {
	sk.once.Do(func() { close(sk.done) })
	sk.conn.Close()
}

// refuseHandshake answers a handshake the app closed before accepting it,
// byte for byte as uvicorn's wsproto protocol does, and drops the
// connection.
func refuseHandshake(w http.ResponseWriter) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "", http.StatusForbidden)
		return
	}
	if n, ok := w.(interface{ noteStatus(int) }); ok {
		n.noteStatus(http.StatusForbidden)
	}
	brw.WriteString("HTTP/1.1 403 \r\ncontent-length: 0\r\n\r\n")
	brw.Flush()
	conn.Close()
}

// notASocket answers a plain HTTP request to a socket route: only a
// WebSocket route is there, so FastAPI's router finds nothing.
func notASocket(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet && websocket.IsWebSocketUpgrade(r) {
		return false
	}
	writeJSON(w, http.StatusNotFound, detail("Not Found"))
	return true
}

// acceptSocket authenticates and accepts a handshake whose parameters
// have been validated: upstream's _accept_authenticated_websocket. It
// returns nil when the socket was refused or closed; otherwise the
// caller must finish it.
func (s *Server) acceptSocket(w http.ResponseWriter, r *http.Request) *socket {
	legacy, hasLegacy := lastQuery(r.URL.Query(), "session_api_key")
	if !hasLegacy {
		if v, ok := r.Header[http.CanonicalHeaderKey("X-Session-API-Key")]; ok && len(v) > 0 {
			legacy, hasLegacy = v[0], true
		}
	}
	keys := len(s.cfg.Keys) > 0
	if keys && hasLegacy && !s.validKey(legacy) {
		s.log.Warn("socket refused: invalid API key", "path", r.URL.Path)
		refuseHandshake(w)
		return nil
	}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return nil // the upgrader has answered
	}
	sk := &socket{conn: conn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if !s.sockets.add(sk) {
		sk.closeWith(websocket.CloseServiceRestart, "")
		return nil
	}
	if keys && !hasLegacy && !s.firstMessageAuth(sk) {
		s.sockets.remove(sk)
		return nil
	}
	return sk
}

// firstMessageAuth reads the auth frame. On failure the socket is closed
// (4001) or, where upstream's endpoint raises, dropped without a close
// frame.
func (s *Server) firstMessageAuth(sk *socket) bool {
	sk.conn.SetReadDeadline(time.Now().Add(s.cfg.SocketAuthTimeout))
	mt, data, err := sk.conn.ReadMessage()
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		// The client closed first; its close frame has been answered.
		sk.conn.Close()
		return false
	case errors.As(err, &ne) && ne.Timeout():
		s.log.Warn("socket auth failed: no auth frame in time")
		sk.closeWith(closeAuthFailed, "Authentication failed")
		return false
	case err != nil:
		sk.conn.Close()
		return false
	case mt != websocket.TextMessage:
		// receive_text() raises KeyError on a binary frame, which nothing
		// catches: uvicorn drops the connection.
		sk.conn.Close()
		return false
	}
	sk.conn.SetReadDeadline(time.Time{})
	v, err := pyLoads(string(data))
	var re *pyRecursionError
	if errors.As(err, &re) {
		sk.conn.Close() // not a JSONDecodeError: it escapes too
		return false
	}
	d, isDict := v.(*pyDict)
	var typ, key any
	if isDict {
		typ, _ = d.get("type")
		key, _ = d.get("session_api_key")
	}
	k, isStr := key.(string)
	if err != nil || !isDict || typ != "auth" || !isStr || !s.validKey(k) {
		s.log.Warn("socket auth failed: bad auth frame")
		sk.closeWith(closeAuthFailed, "Authentication failed")
		return false
	}
	return true
}

func (ss *sockets) add(sk *socket) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closing {
		return false
	}
	if ss.live == nil {
		ss.live = map[*socket]struct{}{}
	}
	ss.live[sk] = struct{}{}
	return true
}

func (ss *sockets) remove(sk *socket) {
	ss.mu.Lock()
	delete(ss.live, sk)
	ss.mu.Unlock()
}

// CloseSockets closes every open socket with 1012 (service restart) and
// refuses new ones, as uvicorn does when the server shuts down.
func (s *Server) CloseSockets() {
	s.sockets.mu.Lock()
	defer s.sockets.mu.Unlock()
	s.sockets.closing = true
	for sk := range s.sockets.live {
		sk.closeWith(websocket.CloseServiceRestart, "")
	}
}

// readFrames hands each frame to handle until the client goes away.
func (sk *socket) readFrames(handle func(mt int, data []byte)) {
	for {
		mt, data, err := sk.conn.ReadMessage()
		if err != nil {
			return
		}
		handle(mt, data)
	}
}

// decodeFrame is receive_json(): the frame's text through json.loads.
// exc and detail name the exception when it fails.
func decodeFrame(mt int, data []byte) (v any, exc, detail string) {
	if mt != websocket.TextMessage {
		return nil, "KeyError", "'text'" // a binary frame has no "text"
	}
	v, err := pyLoads(string(data))
	var re *pyRecursionError
	switch {
	case errors.As(err, &re):
		return nil, "RecursionError", err.Error()
	case err != nil:
		return nil, "JSONDecodeError", err.Error()
	}
	return v, "", ""
}
