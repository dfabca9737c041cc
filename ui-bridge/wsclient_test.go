package uibridge

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// dialOptions is how a test client connects to the stream.
type dialOptions struct {
	Subprotocols []string
	HTTPHeader   http.Header
	// HTTPClient's transport supplies the dialer (a rebinding resolver,
	// a small socket buffer).
	HTTPClient *http.Client
	// Compression offers permessage-deflate.
	Compression bool
}

// wsDial connects a gorilla client to url.
func wsDial(ctx context.Context, url string, opts *dialOptions) (*websocket.Conn, *http.Response, error) {
	if opts == nil {
		opts = &dialOptions{}
	}
	d := websocket.Dialer{
		HandshakeTimeout:  10 * time.Second,
		Subprotocols:      opts.Subprotocols,
		EnableCompression: opts.Compression,
	}
	if opts.HTTPClient != nil {
		if tr, ok := opts.HTTPClient.Transport.(*http.Transport); ok {
			d.NetDialContext = tr.DialContext
		}
	}
	c, resp, err := d.DialContext(ctx, url, opts.HTTPHeader)
	if c != nil {
		c.SetReadLimit(64 << 20)
	}
	return c, resp, err
}

// closeStatus is the close code err carries, or -1.
func closeStatus(err error) int {
	if ce, ok := asCloseError(err); ok {
		return ce.Code
	}
	return -1
}

func asCloseError(err error) (*websocket.CloseError, bool) {
	var ce *websocket.CloseError
	ok := errors.As(err, &ce)
	return ce, ok
}

// countingDialer counts the bytes a client reads off its socket: what
// crossed the wire, compressed or not.
type countingDialer struct{ read atomic.Int64 }

func (d *countingDialer) client() *http.Client {
	var nd net.Dialer
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, n: &d.read}, nil
	}}}
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}
