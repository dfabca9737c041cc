package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	uibridge "github.com/canvasapp/companion/ui-bridge"
)

// httpTimeouts bound how long a client may hold a connection without
// finishing a request: a slow-loris client that trickles its headers or
// its body, or one that keeps an idle connection open, is cut off.
type httpTimeouts struct {
	header time.Duration
	body   time.Duration
	idle   time.Duration
}

func (t *httpTimeouts) addFlags(fs *flag.FlagSet) {
	fs.DurationVar(&t.header, "read-header-timeout", 10*time.Second, "how long a client may take to send a request's headers")
	fs.DurationVar(&t.body, "body-timeout", uibridge.DefaultBodyTimeout, "how long a client may take to send a request body once its headers arrived")
	fs.DurationVar(&t.idle, "idle-timeout", 60*time.Second, "how long an idle keep-alive connection stays open")
}

func (t *httpTimeouts) check() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--read-header-timeout", t.header}, {"--body-timeout", t.body}, {"--idle-timeout", t.idle}} {
		if d.v <= 0 {
			return fmt.Errorf("%s %v: must be more than zero; an unbounded wait lets a slow client hold a connection for ever", d.flag, d.v)
		}
	}
	return nil
}

// normalizeOrigins rewrites each --allow-origin into the form browsers
// send, or says why one cannot be an origin.
func normalizeOrigins(origins []string) ([]string, error) {
	out := make([]string, 0, len(origins))
	for _, o := range origins {
		n, err := uibridge.NormalizeOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("--allow-origin %q: %v", o, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// newMetricsServer serves GET /metrics only (--metrics-listen), and
// /healthz; every other path is 404.
func newMetricsServer(h http.Handler, t httpTimeouts, log *slog.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET "+uibridge.MetricsPath, h)
	mux.HandleFunc(healthzPath, func(w http.ResponseWriter, r *http.Request) { probe(w, r, "", nil) })
	return newHTTPServer(mux, t, log)
}

// newHTTPServer is the http.Server of desktop and serve. There is no
// ReadTimeout or WriteTimeout: they would cut WebSocket streams, which
// live on after the handshake; request bodies are bounded by the bridge
// instead (uibridge.Config.BodyTimeout).
func newHTTPServer(h http.Handler, t httpTimeouts, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.header,
		IdleTimeout:       t.idle,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
