package apicontract

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// maxBufferedBody bounds the JSON request bodies the browser proxy reads
// whole so that they can be checked; larger ones stream unchecked.
const maxBufferedBody = 1 << 20

// BrowserProxy is an HTTP forward proxy for a headless browser under
// test (Chromium's --proxy-server with --proxy-bypass-list=<-loopback>):
// its exchanges with a registered companion are checked like a Go
// client's. Plain HTTP requests go through the checker's transport.
// CONNECT to a registered companion (how Chromium sends ws:// through a
// proxy) is answered here: the proxy serves HTTP on the tunnel itself and
// relays WebSockets message by message (relay.go), checking the handshake
// and, on the stream route, companion's messages. CONNECT to anything else
// on loopback (TLS, other test servers) is tunnelled unchecked; anything
// off loopback is refused at once (403). An upstream that cannot be
// reached closes the browser's connection, which the page sees as the
// network failure it would see without the proxy.
type BrowserProxy struct {
	Addr string // host:port to give the browser
	ln   net.Listener
	srv  *http.Server

	mu      sync.Mutex
	serving map[*http.Request]time.Time // requests not answered yet
}

// track records r as being served until the returned func is called.
func (p *BrowserProxy) track(r *http.Request) (done func()) {
	p.mu.Lock()
	p.serving[r] = time.Now()
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.serving, r)
		p.mu.Unlock()
	}
}

// Waiting lists the requests the proxy has received and not answered
// for longer than a second (a relayed WebSocket counts until it ends):
// with the page's own list, it tells a browser that never sent a request
// from an upstream that never answered it.
func (p *BrowserProxy) Waiting() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for r, since := range p.serving {
		if age := time.Since(since); age > time.Second {
			out = append(out, fmt.Sprintf("%s %s (%s)", r.Method, r.URL, age.Round(time.Second)))
		}
	}
	return out
}

// NewBrowserProxy listens on 127.0.0.1:0 and serves until Close.
func (c *Checker) NewBrowserProxy() (*BrowserProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("apicontract: browser proxy: %w", err)
	}
	fw := c.newForwarder()
	p := &BrowserProxy{Addr: ln.Addr().String(), ln: ln, serving: map[*http.Request]time.Time{}}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer p.track(r)()
		host := r.Host
		if r.Method != http.MethodConnect && r.URL.Host != "" {
			host = r.URL.Host
		}
		switch {
		case !isLoopback(host):
			// The browser's own background traffic (updates, sign-in,
			// autofill) must not wait here on a resolver or a dial to
			// the outside: held open, it fills the browser's few
			// connections to this proxy and the page's own requests
			// queue behind it.
			http.Error(w, "the test proxy reaches loopback addresses only", http.StatusForbidden)
		case r.Method != http.MethodConnect:
			fw.ServeHTTP(w, r)
		case c.isTarget(r.Host):
			p.serveTunnel(w, r, fw)
		default:
			p.tunnel(w, r)
		}
	})}
	go p.srv.Serve(ln)
	return p, nil
}

// bufferJSON reads a small JSON body whole so that the transport can
// check it (it checks only bodies it can read again).
func bufferJSON(r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || !isJSON(r.Header.Get("Content-Type")) ||
		r.ContentLength <= 0 || r.ContentLength > maxBufferedBody {
		return
	}
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return
	}
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

func (p *BrowserProxy) tunnel(w http.ResponseWriter, r *http.Request) {
	up, err := net.Dial("tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no hijacking", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	go func() {
		io.Copy(up, buf) // what the client sent, buffered bytes first
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	go func() {
		io.Copy(conn, up)
		conn.Close()
		up.Close()
	}()
}

// isLoopback reports whether hostport names this machine by a loopback
// address or as localhost, which needs no resolver.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Close stops the proxy; open tunnels end when either side closes.
func (p *BrowserProxy) Close() error {
	return p.srv.Close()
}
