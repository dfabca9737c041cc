package uibridge

import (
	"errors"
	"net"
	"net/http"
	"time"
)

// DefaultBodyTimeout is how long a client may take to send a request body.
const DefaultBodyTimeout = 30 * time.Second

// hasBody reports whether r announced a body (a length, or chunked).
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// armBodyDeadline bounds the time r's body may take to arrive: a client
// that trickles a body (slowloris) is cut off at the deadline instead of
// holding its connection for ever. net/http lifts the deadline itself once
// the body has been read to its end (it then starts its own idle read), so
// the work done after the body is not bound by it. Requests without a
// body, WebSocket handshakes included, are left alone: their headers are
// bounded by the http.Server's ReadHeaderTimeout, and a deadline set on
// them would cut the idle read net/http has already started, cancelling
// the request.
func armBodyDeadline(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if !hasBody(r) {
		return
	}
	// An error means no real connection underneath (a test recorder).
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
}

// dropBody makes a refused request's answer go out at once and closes the
// connection after it, without reading a body nobody will use. Otherwise
// net/http would first read (up to 256 KiB of) the body, and a client
// sending it slowly would wait for its 401 as long as it liked.
func dropBody(w http.ResponseWriter, r *http.Request) {
	if !hasBody(r) {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// isTimeout reports whether err is a network deadline running out.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
