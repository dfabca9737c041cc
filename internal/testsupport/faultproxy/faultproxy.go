// Package faultproxy puts a fault-injecting reverse proxy in front of a
// test server (an S3 server, say): it passes requests through until a
// test sets a fault for the requests a rule matches, then answers them
// with an error status or holds them without an answer (a stall) until
// the client gives up or the test ends. The Host header is passed
// through unchanged, so signed (SigV4) requests still verify.
package faultproxy

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// Fault is what the proxy does with a matching request.
type Fault struct {
	// Status, when not 0, is answered with Body (and ContentType).
	Status      int
	Body        string
	ContentType string
	// Stall holds the request until the client goes away.
	Stall bool
}

// Proxy is a running proxy.
type Proxy struct {
	// URL is http://127.0.0.1:PORT.
	URL string

	mu    sync.Mutex
	match func(*http.Request) bool
	fault Fault
	hits  int
	stop  chan struct{}
}

// Start runs a proxy to target for tb; it stops when tb ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{stop: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = nil
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		hit := p.match != nil && p.match(r)
		f := p.fault
		if hit {
			p.hits++
		}
		p.mu.Unlock()
		switch {
		case hit && f.Stall:
			select {
			case <-r.Context().Done():
			case <-p.stop:
			}
			return
		case hit && f.Status != 0:
			if f.ContentType != "" {
				w.Header().Set("Content-Type", f.ContentType)
			}
			w.WriteHeader(f.Status)
			w.Write([]byte(f.Body))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	tb.Cleanup(func() { close(p.stop) })
	p.URL = srv.URL
	return p
}

// Set makes the proxy apply f to requests match accepts (nil: none).
func (p *Proxy) Set(match func(*http.Request) bool, f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match, p.fault, p.hits = match, f, 0
}

// Hits is how many requests the current fault matched.
func (p *Proxy) Hits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits
}

// All matches every request.
func All(*http.Request) bool { return true }
