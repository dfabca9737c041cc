package uibridge

import (
	"errors"
	"io"
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
// holding its connection for ever. The deadline is lifted once the body
// has been read to its end, so that it cannot cut the connection's idle
// read that the server starts after the body (a timeout there would
// cancel a request that is still being answered). Requests without a
// body, WebSocket handshakes included, are left alone: their headers are
// bounded by the http.Server's ReadHeaderTimeout.
func armBodyDeadline(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if !hasBody(r) {
		return
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
		return // not a real connection (a test recorder)
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
}

type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
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
