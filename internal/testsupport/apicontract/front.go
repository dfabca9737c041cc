package apicontract

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Front is a checking reverse proxy in front of one companion address,
// for clients that cannot be given a proxy (Node's fetch and WebSocket
// ignore proxy settings): they are given the front's URL instead of
// companion's. HTTP goes through the checker's transport and WebSockets
// through the same relay as the browser proxy's, so exchanges are checked,
// and attributed, as exchanges with the upstream: they count only while
// the upstream is registered, and its failures go to whoever registered
// it. The front targets the address, not a process, so a companion
// restarted on the same port is reached again.
type Front struct {
	URL string // the upstream's URL with the front's host:port
	ln  net.Listener
	srv *http.Server
}

// NewFront listens on 127.0.0.1:0 and forwards every request to upstream
// (a companion's ready URL, base path included) until Close.
func (c *Checker) NewFront(upstream string) (*Front, error) {
	up, err := url.Parse(upstream)
	if err != nil || up.Host == "" || (up.Scheme != "http" && up.Scheme != "https") {
		return nil, fmt.Errorf("apicontract: front: upstream %q is not an absolute http URL", upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("apicontract: front for %s: %w", upstream, err)
	}
	self := "http://" + ln.Addr().String()
	fw := c.newForwarder()
	f := &Front{URL: self + strings.TrimSuffix(up.Path, "/"), ln: ln}
	f.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			out := relayTarget(r, up.Scheme, up.Host)
			// companion allows only its own address as Host (DNS
			// rebinding), and its own origin as a same-origin caller:
			// the front stands in for that address, so it names it.
			out.Host = up.Host
			if o := out.Header.Values("Origin"); len(o) == 1 && o[0] == self {
				out.Header.Set("Origin", up.Scheme+"://"+up.Host)
			}
			fw.ServeHTTP(w, out)
		}),
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go f.srv.Serve(ln)
	return f, nil
}

// Close stops the front; relayed WebSockets end when either side closes.
func (f *Front) Close() error {
	return f.srv.Close()
}
