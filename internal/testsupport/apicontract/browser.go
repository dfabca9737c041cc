package apicontract

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
)

// maxBufferedBody bounds the JSON request bodies the browser proxy reads
// whole so that they can be checked; larger ones stream unchecked.
const maxBufferedBody = 1 << 20

// BrowserProxy is an HTTP forward proxy for a headless browser under
// test (Chromium's --proxy-server with --proxy-bypass-list=<-loopback>):
// its plain HTTP requests go through the checker's transport, so the
// page's exchanges with a registered companion are checked like a Go
// client's; CONNECT (WebSockets, TLS) is tunnelled unchecked. An upstream
// that cannot be reached closes the browser's connection, which the page
// sees as the network failure it would see without the proxy.
type BrowserProxy struct {
	Addr string // host:port to give the browser
	ln   net.Listener
	srv  *http.Server
}

// NewBrowserProxy listens on 127.0.0.1:0 and serves until Close.
func (c *Checker) NewBrowserProxy() (*BrowserProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
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
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, herr := hj.Hijack(); herr == nil {
					conn.Close()
					return
				}
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p := &BrowserProxy{Addr: ln.Addr().String(), ln: ln}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			p.tunnel(w, r)
			return
		}
		rp.ServeHTTP(w, r)
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

// Close stops the proxy; open tunnels end when either side closes.
func (p *BrowserProxy) Close() error {
	return p.srv.Close()
}
