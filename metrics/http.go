package metrics

import (
	"bufio"
	"net"
	"net/http"
	"time"
)

// RouteTracker returns r with a place for the route pattern that will
// serve it, and a function that reads that pattern once the handler has
// returned ("" when no route matched: the request was refused before
// routing). uibridge.TrackRoute is one.
type RouteTracker func(r *http.Request) (*http.Request, func() string)

// Unrouted is the route label of a request no route pattern served (the
// gate refused it, or no route matched).
const Unrouted = "unrouted"

// Middleware counts and times every request next answers, labelled by the
// route pattern track reports (never the raw path).
func (m *Metrics) Middleware(next http.Handler, track RouteTracker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		r, route := track(r)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			m.inFlight.Dec()
			pattern := route()
			if pattern == "" {
				pattern = Unrouted
			}
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			method := methodOf(r.Method)
			m.requests.WithLabelValues(pattern, method, statusClass(status)).Inc()
			if status >= 500 {
				m.errors.WithLabelValues(pattern, method).Inc()
			}
			m.duration.WithLabelValues(pattern, method).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(sw, r)
	})
}

// methodOf bounds the method label: a client may send any method.
func methodOf(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// statusClass is the bounded status label: 1xx to 5xx.
func statusClass(code int) string {
	switch {
	case code < 200:
		return "1xx"
	case code < 300:
		return "2xx"
	case code < 400:
		return "3xx"
	case code < 500:
		return "4xx"
	}
	return "5xx"
}

// statusWriter records the status answered. It is a Hijacker (WebSocket
// handshakes) and a Flusher, and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 || w.status < 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return c, rw, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
