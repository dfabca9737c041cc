package metrics

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Unrouted is the route label of a request no route pattern served (the
// gate refused it, or no route matched).
const Unrouted = "unrouted"

// Middleware counts and times every request next answers, labelled by the
// route pattern next reports through the writer's SetRoute (the bridge
// does: uibridge.RouteSetter), never by the raw path.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			m.inFlight.Dec()
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			m.route(sw.route, r.Method).observe(status, time.Since(start))
		}()
		next.ServeHTTP(sw, r)
	})
}

// routeKey names the series of one route and method.
type routeKey struct{ route, method string }

// routeSeries are one route's and method's series, resolved once: looking
// series up by label values on every request would cost more than the
// rest of the middleware.
type routeSeries struct {
	m        *Metrics
	key      routeKey
	mu       sync.Mutex
	byStatus [5]prometheus.Counter // 1xx to 5xx, made at first use
	errors   prometheus.Counter
	duration prometheus.Observer
}

func (m *Metrics) route(route, method string) *routeSeries {
	if route == "" {
		route = Unrouted
	}
	k := routeKey{route, methodOf(method)}
	m.routesMu.RLock()
	rs := m.routes[k]
	m.routesMu.RUnlock()
	if rs != nil {
		return rs
	}
	m.routesMu.Lock()
	defer m.routesMu.Unlock()
	if rs = m.routes[k]; rs == nil {
		rs = &routeSeries{m: m, key: k, errors: m.errors.WithLabelValues(k.route, k.method),
			duration: m.duration.WithLabelValues(k.route, k.method)}
		m.routes[k] = rs
	}
	return rs
}

func (rs *routeSeries) observe(status int, d time.Duration) {
	i := min(max(status/100, 1), 5) - 1
	rs.mu.Lock()
	c := rs.byStatus[i]
	if c == nil {
		c = rs.m.requests.WithLabelValues(rs.key.route, rs.key.method, strconv.Itoa(i+1)+"xx")
		rs.byStatus[i] = c
	}
	rs.mu.Unlock()
	c.Inc()
	if status >= 500 {
		rs.errors.Inc()
	}
	rs.duration.Observe(d.Seconds())
}

// methodOf bounds the method label: a client may send any method.
func methodOf(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// statusWriter records the status answered. It is a Hijacker (WebSocket
// handshakes) and a Flusher, and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
	route  string
}

// SetRoute implements uibridge.RouteSetter.
func (w *statusWriter) SetRoute(pattern string) { w.route = pattern }

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
