package webhooks

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"time"
)

// Control is a dialer's check of the address it is about to connect to:
// the provider calls' guard (wasm.PublicOnly), passed in by the caller so
// that this package does not depend on the Wasm host.
type Control func(network, address string, c syscall.RawConn) error

// errRedirect: a receiver's redirect is an answer, not a place to go; not
// following it also means no redirect can lead to a private address.
var errRedirect = errors.New("the webhook answered with a redirect, which is not followed")

// NewClient returns the client deliveries are sent with: every connection
// checked by control (nil: any address, for an operator who allowed
// private ones), no proxy from the environment, no redirects followed.
// Each attempt's own deadline bounds it (Config.Timeout).
func NewClient(control Control) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: control}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  10 * time.Second,
		MaxResponseHeaderBytes: 16 << 10,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect }}
}
