package apicontract

import (
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// streamPath is the stream route, whose messages are StreamMessage; the
// agent-proxy WebSockets carry the agent's own protocol and are not.
const streamPath = "/v1/ws"

// closeGrace is how long the relay waits, once one side has sent its
// close frame, for the other side's answer before it cuts both.
const closeGrace = 10 * time.Second

// forwarder sends requests for a companion on, checked: plain HTTP
// through a reverse proxy on the checker's transport, WebSocket upgrades
// through relayWS. The request it is given is already absolute (scheme
// and host of the companion) and carries the Host header to send.
type forwarder struct {
	c  *Checker
	rp *httputil.ReverseProxy
}

func (c *Checker) newForwarder() *forwarder {
	base := http.DefaultTransport
	if t, ok := base.(*transport); ok {
		base = t.next // avoid checking twice
	}
	if t, ok := base.(*http.Transport); ok {
		t = t.Clone()
		t.Proxy = nil
		base = t
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := *pr.In.URL
			pr.Out.URL = &u
			pr.Out.Host = pr.In.Host
			bufferJSON(pr.Out)
		},
		Transport:     c.Transport(base),
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			dropClient(w)
		},
	}
	return &forwarder{c: c, rp: rp}
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if websocket.IsWebSocketUpgrade(r) {
		f.c.relayWS(w, r)
		return
	}
	f.rp.ServeHTTP(w, r)
}

// dropOnDial are the handshake headers gorilla's dialer writes itself (or
// refuses), hop-by-hop headers, and the extensions the relay does not
// negotiate (it copies whole messages, so each side negotiates its own).
var dropOnDial = []string{
	"Upgrade", "Connection", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions",
	"Host", "Proxy-Connection", "Proxy-Authorization", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding",
	"Content-Length",
}

// dropOnAnswer are the headers of companion's answer that the browser's
// side makes anew (gorilla's upgrader writes the handshake; net/http the
// framing of a refusal).
var dropOnAnswer = []string{
	"Upgrade", "Connection", "Sec-Websocket-Accept", "Sec-Websocket-Extensions", "Sec-Websocket-Protocol",
	"Keep-Alive", "Transfer-Encoding", "Content-Length",
}

// relayWS relays a WebSocket to the companion r names: it dials companion
// with the client's headers, checks the handshake, answers the client as
// companion answered (a refusal as is; an acceptance with the same
// subprotocol) and then copies messages both ways, checking companion's
// messages on the stream route.
func (c *Checker) relayWS(w http.ResponseWriter, r *http.Request) {
	target := *r.URL
	target.Scheme = strings.Replace(target.Scheme, "http", "ws", 1)
	header := r.Header.Clone()
	for _, k := range dropOnDial {
		header.Del(k)
	}
	if r.Host != "" {
		header.Set("Host", r.Host) // gorilla sends it as the Host line
	}
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	up, resp, err := d.DialContext(r.Context(), target.String(), header)
	sent := header.Clone()
	sent.Del("Host")
	c.CheckHandshake(target.String(), sent, resp)
	if err != nil {
		if resp == nil {
			dropClient(w)
			return
		}
		answerRefusal(w, resp)
		return
	}
	answer := resp.Header.Clone()
	for _, k := range dropOnAnswer {
		answer.Del(k)
	}
	if p := up.Subprotocol(); p != "" {
		answer.Set("Sec-Websocket-Protocol", p)
	}
	upgrader := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	down, err := upgrader.Upgrade(w, r, answer)
	if err != nil {
		up.Close()
		return
	}
	var check func([]byte)
	if base, ok := c.target(target.Host); ok && strings.TrimPrefix(target.Path, base) == streamPath {
		host := target.Host
		check = func(data []byte) { c.CheckMessage(host, data) }
	}
	pipeWS(up, down, check)
}

// dropClient answers a request companion gave no answer to (it could not
// be reached) by closing the client's connection: the client sees the
// network failure it would see without the relay. A connection that
// cannot be taken over gets 502 instead.
func dropClient(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	w.WriteHeader(http.StatusBadGateway)
}

// answerRefusal gives the client companion's refusal of a handshake:
// status, headers and the body gorilla kept.
func answerRefusal(w http.ResponseWriter, resp *http.Response) {
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs
	}
	for _, k := range dropOnAnswer {
		h.Del(k)
	}
	w.WriteHeader(resp.StatusCode)
	if resp.Body != nil {
		_, _ = io.Copy(w, resp.Body)
	}
}

// pipeWS copies messages between companion (up) and the client (down)
// until both have closed, with one blocking copy per direction, so that
// a slow reader slows its sender instead of the relay buffering ahead
// (companion drops stream clients that do not read, as it should). Close
// frames, pings and pongs pass through as they are; check, if not nil,
// sees every message companion sends.
func pipeWS(up, down *websocket.Conn, check func([]byte)) {
	passControl(up, down)
	passControl(down, up)
	var once sync.Once
	cut := func() {
		once.Do(func() {
			up.Close()
			down.Close()
		})
	}
	done := make(chan bool, 2)
	go func() { done <- copyWS(down, up, check) }()
	go func() { done <- copyWS(up, down, nil) }()
	if closed := <-done; closed {
		// One side said goodbye and it was passed on: the other's answer
		// (and whatever it still sends before it) may follow.
		up.SetReadDeadline(time.Now().Add(closeGrace))
		down.SetReadDeadline(time.Now().Add(closeGrace))
	} else {
		cut()
	}
	<-done
	cut()
}

// passControl makes from's pings and pongs reach to, so that each end
// learns whether the other is alive (not just the relay), and keeps
// gorilla from answering a close frame itself: copyWS passes it on and
// the other end's answer comes back the same way.
func passControl(from, to *websocket.Conn) {
	// A failed write is the other end's reader's business: it sees the
	// connection end and cuts both.
	from.SetPingHandler(func(data string) error {
		_ = to.WriteControl(websocket.PingMessage, []byte(data), time.Now().Add(closeGrace))
		return nil
	})
	from.SetPongHandler(func(data string) error {
		_ = to.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(closeGrace))
		return nil
	})
	from.SetCloseHandler(func(int, string) error { return nil })
}

// copyWS copies from's messages to to until from ends. It reports true
// when from ended with a close frame, which it passes on (same code and
// reason); a connection that broke without one is not answered with one.
func copyWS(to, from *websocket.Conn, check func([]byte)) bool {
	for {
		mt, data, err := from.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code == websocket.CloseAbnormalClosure {
				return false
			}
			msg := websocket.FormatCloseMessage(ce.Code, ce.Text)
			return to.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeGrace)) == nil
		}
		if check != nil {
			check(data)
		}
		if err := to.WriteMessage(mt, data); err != nil {
			return false
		}
	}
}

// relayTarget is where the relay is going: r as an absolute http URL of
// the companion at host.
func relayTarget(r *http.Request, scheme, host string) *http.Request {
	out := r.Clone(r.Context())
	out.URL = &url.URL{Scheme: scheme, Host: host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	out.RequestURI = ""
	return out
}
