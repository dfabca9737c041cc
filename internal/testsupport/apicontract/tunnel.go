package apicontract

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
)

// isTarget reports whether host is a registered companion.
func (c *Checker) isTarget(host string) bool {
	_, ok := c.target(host)
	return ok
}

// serveTunnel answers a CONNECT to a registered companion by serving HTTP
// on the tunnel itself: the browser's requests in it are forwarded to
// companion, checked, one by one (keep-alive included), and a WebSocket
// upgrade is relayed.
func (p *BrowserProxy) serveTunnel(w http.ResponseWriter, r *http.Request, fw *forwarder) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "no hijacking", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		conn.Close()
		return
	}
	host := r.Host
	tc := &tunnelConn{Conn: conn, r: buf.Reader, closed: make(chan struct{})}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer p.track(r)()
			fw.ServeHTTP(w, relayTarget(r, "http", host))
		}),
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go srv.Serve(&oneConnListener{conn: tc})
}

// tunnelConn is the browser's side of a tunnel: reads start with what the
// proxy's server had already buffered, and Close is observable so that the
// one-connection listener can end.
type tunnelConn struct {
	net.Conn
	r      *bufio.Reader
	once   sync.Once
	closed chan struct{}
}

func (c *tunnelConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (c *tunnelConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// oneConnListener hands out one connection, then blocks until that
// connection is closed (by the server, or by the relay after hijacking
// it) and reports itself closed, which ends http.Server.Serve.
type oneConnListener struct {
	conn *tunnelConn
	mu   sync.Mutex
	gave bool
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	gave := l.gave
	l.gave = true
	l.mu.Unlock()
	if !gave {
		return l.conn, nil
	}
	<-l.conn.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }
