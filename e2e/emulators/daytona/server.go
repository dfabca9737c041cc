// Package daytona emulates the parts of the Daytona control-plane API
// (https://app.daytona.io/api, OpenAPI spec libs/api-client-go/api/openapi.yaml
// at daytonaio/daytona b5a5d9e78) that companion uses: listing with cursor
// pagination, create, get, delete, start, stop, archive, pause,
// last-activity and the lifecycle-interval setters, with Daytona's native
// auto-stop, auto-archive and auto-delete running on an emulated clock.
//
// Facts come from ../shared/reference/providers.md §1 and the API's source;
// where that is unsure the choice is noted at the spot.
package daytona

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// Options configure a Server.
type Options struct {
	// Token and Tokens are the API keys accepted as "Authorization: Bearer".
	// With none, every request is refused.
	Token  string
	Tokens []string
	// Clock drives every state change; nil means a wall clock.
	Clock *emulator.Clock
	// BasePath is where the API is served; default "/api" like the real
	// base URL. Use "/" to serve at the root.
	BasePath string
	// OrganizationID is stamped on every sandbox; default a random UUID.
	OrganizationID string
	// Delays is how long each transition takes in emulated time; nil means
	// DefaultDelays. Zero fields make that transition instant.
	Delays *Delays
	// Admin mounts the admin routes under /_emulator/.
	Admin bool
	// EnforceRateLimits makes the throttlers answer 429 when a window is
	// used up. Off by default: the headers are always sent, but tests get
	// 429s deterministically from fault injection instead.
	EnforceRateLimits bool
	// RateLimits overrides the per-minute throttler limits (keys:
	// authenticated, sandbox-create, sandbox-lifecycle, failed-auth).
	RateLimits map[string]int
	// ListLag makes GET /sandbox eventually consistent, as the spec marks
	// it: a box created through the API is missing from the list for
	// ListLag, and a deleted one is still listed, as it was when the
	// delete began, for ListLag after that. Get is always current. Zero
	// means the list is current too.
	ListLag time.Duration
	// AgentServer, when set, serves the requests the preview proxy
	// forwards to a box's port 8000 (see preview.go), with the server's
	// own ResponseWriter, so streaming and WebSocket upgrades pass; nil
	// answers /server_info itself and 502 for anything else.
	AgentServer func(sandboxID string) http.Handler
}

// Delays are the durations of Daytona's asynchronous transitions.
type Delays struct {
	Create, Start, Stop, Archive, Restore, Pause, Resume, Destroy time.Duration
}

// DefaultDelays are a few seconds each, restoring from archive slower.
func DefaultDelays() Delays {
	return Delays{
		Create: 2 * time.Second, Start: 2 * time.Second, Stop: 2 * time.Second,
		Archive: 5 * time.Second, Restore: 10 * time.Second,
		Pause: time.Second, Resume: time.Second, Destroy: time.Second,
	}
}

// Tier 1 per-minute limits from Daytona's limits.mdx. failed-auth counts
// refused credentials; its limit is not documented [uncertain: 100 chosen].
var defaultLimits = map[string]int{
	"authenticated":     10000,
	"sandbox-create":    300,
	"sandbox-lifecycle": 10000,
	"failed-auth":       100,
}

// Server is a Daytona API emulator. It embeds emulator.Base, so Clock,
// Faults, Requests and Close are available on it. Safe for concurrent use.
type Server struct {
	*emulator.Base
	opts    Options
	tokens  emulator.Tokens
	delays  Delays
	base    string
	limits  map[string]*emulator.Window
	handler http.Handler

	mu     sync.Mutex
	boxes  map[string]*box   // by id
	ghosts map[string]*ghost // destroyed boxes still listed (ListLag), by id

	proxyProtocol, proxyDomain string // preview URLs; see SetProxy
	connSeq                    uint64 // numbers requests open through the proxy
}

type box struct {
	sb    Sandbox
	until time.Time // when a transitional state settles; zero when settled
	// listedFrom is when the list starts showing the box (ListLag).
	listedFrom time.Time
	// deleting is the box as listed from the moment its delete began until
	// ListLag after; nil when it is not being deleted or there is no lag.
	deleting   *Sandbox
	deletingAt time.Time
	// previewToken is the sandbox's authToken: made lazily, dropped by a
	// start from stopped or archived (not by a resume from paused).
	previewToken string
	// open holds when each request still open through the preview proxy
	// began (by a sequence number); see openLocked.
	open map[uint64]time.Time
}

// ghost is a destroyed box the lagging list still shows.
type ghost struct {
	sb    Sandbox
	until time.Time
}

// New returns an emulator configured by o.
func New(o Options) *Server {
	s := &Server{
		Base:   emulator.NewBase(o.Clock),
		opts:   o,
		tokens: append(emulator.Tokens{o.Token}, o.Tokens...),
		delays: DefaultDelays(),
		base:   strings.TrimSuffix(o.BasePath, "/"),
		limits: map[string]*emulator.Window{},
		boxes:  map[string]*box{},
		ghosts: map[string]*ghost{},
	}
	if o.BasePath == "" {
		s.base = "/api"
	}
	if o.Delays != nil {
		s.delays = *o.Delays
	}
	if s.opts.OrganizationID == "" {
		s.opts.OrganizationID = emulator.UUID()
	}
	for name, n := range defaultLimits {
		if v, ok := o.RateLimits[name]; ok {
			n = v
		}
		s.limits[name] = &emulator.Window{Limit: n, Period: time.Minute}
	}

	mux := http.NewServeMux()
	p := s.base + "/sandbox"
	s.route(mux, "GET "+p, nil, s.list)
	s.route(mux, "POST "+p, []string{"sandbox-create"}, s.create)
	s.route(mux, "GET "+p+"/{idOrName}", nil, s.get)
	s.route(mux, "DELETE "+p+"/{idOrName}", []string{"sandbox-lifecycle"}, s.delete)
	s.route(mux, "POST "+p+"/{idOrName}/start", []string{"sandbox-lifecycle"}, s.start)
	s.route(mux, "POST "+p+"/{idOrName}/stop", []string{"sandbox-lifecycle"}, s.stop)
	s.route(mux, "POST "+p+"/{idOrName}/archive", []string{"sandbox-lifecycle"}, s.archive)
	s.route(mux, "POST "+p+"/{idOrName}/pause", []string{"sandbox-lifecycle"}, s.pause)
	s.route(mux, "POST "+p+"/{idOrName}/last-activity", nil, s.lastActivity)
	s.route(mux, "POST "+p+"/{idOrName}/autostop/{interval}", nil, s.setInterval("autostop"))
	s.route(mux, "POST "+p+"/{idOrName}/autoarchive/{interval}", nil, s.setInterval("autoarchive"))
	s.route(mux, "POST "+p+"/{idOrName}/autodelete/{interval}", nil, s.setInterval("autodelete"))
	s.route(mux, "PUT "+p+"/{idOrName}/labels", nil, s.replaceLabels)
	s.route(mux, "GET "+p+"/{idOrName}/ports/{port}/preview-url", nil, s.previewURL)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// NestJS's default answer for an unknown route.
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("Cannot %s %s", r.Method, r.URL.Path), "")
	})

	var admin http.Handler
	if o.Admin {
		admin = s.adminRoutes()
	}
	s.handler = s.Base.Handler(dialect{s}, mux, admin)
	return s
}

// Handler returns the HTTP handler serving the API (and the admin routes
// when Options.Admin is set).
func (s *Server) Handler() http.Handler { return s.withProxy(s.handler) }

// BasePath returns the path prefix the API is served under ("/api").
func (s *Server) BasePath() string { return s.base }

// route registers h behind the throttlers every authenticated route has
// ("authenticated") plus extra.
func (s *Server) route(mux *http.ServeMux, pattern string, extra []string, h http.HandlerFunc) {
	throttlers := append([]string{"authenticated"}, extra...)
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		now := s.Clock().Now()
		for _, name := range throttlers {
			win := s.limits[name]
			remaining, reset, ok := win.Hit(now)
			setLimitHeaders(w.Header(), name, win.Limit, remaining, emulator.SecondsUntil(now, reset))
			if !ok && s.opts.EnforceRateLimits {
				w.Header().Set("Retry-After-"+name, fmt.Sprint(max(emulator.SecondsUntil(now, reset), 1)))
				s.fail(w, r, http.StatusTooManyRequests, "Rate limit exceeded", "")
				return
			}
		}
		w.Header().Set("X-Daytona-Api-Version", apiVersion)
		h(w, r)
	})
}

// apiVersion is the release the reference was read at.
const apiVersion = "v0.190.0"

func setLimitHeaders(h http.Header, throttler string, limit, remaining, resetSecs int) {
	h.Set("X-RateLimit-Limit-"+throttler, fmt.Sprint(limit))
	h.Set("X-RateLimit-Remaining-"+throttler, fmt.Sprint(remaining))
	h.Set("X-RateLimit-Reset-"+throttler, fmt.Sprint(resetSecs))
}

// fail writes Daytona's error body. The shape follows the API's
// AllExceptionsFilter (apps/api/src/filters/all-exceptions.filter.ts):
// path, timestamp, statusCode, error (the HTTP status text), message, plus
// source and, for some errors, a machine-readable code in newer versions.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, message, code string) {
	body := map[string]any{
		"path":       r.URL.RequestURI(),
		"timestamp":  s.Clock().Now().UTC().Format(jsTime),
		"statusCode": status,
		"source":     "DAYTONA_API",
		"error":      http.StatusText(status),
		"message":    message,
	}
	if code != "" {
		body["code"] = code
	}
	emulator.WriteJSON(w, status, body)
}

// dialect adapts Server to emulator.Dialect.
type dialect struct{ s *Server }

func (d dialect) Authenticate(r *http.Request) emulator.AuthOutcome {
	return d.s.tokens.CheckBearer(r)
}

func (d dialect) Unauthorized(w http.ResponseWriter, r *http.Request, outcome emulator.AuthOutcome) {
	// A missing header fails passport's bearer strategy (bare
	// UnauthorizedException); an unknown key is rejected by ApiKeyStrategy
	// with "Invalid API key".
	msg := "Unauthorized"
	if outcome == emulator.AuthInvalid {
		msg = "Invalid API key"
	}
	// Refused credentials go through the failed-auth throttler; once its
	// window is used up the answer is 429 with a plain Retry-After (the
	// API's rate-limit-headers util).
	s := d.s
	now := s.Clock().Now()
	win := s.limits["failed-auth"]
	remaining, reset, ok := win.Hit(now)
	setLimitHeaders(w.Header(), "failed-auth", win.Limit, remaining, emulator.SecondsUntil(now, reset))
	if !ok && s.opts.EnforceRateLimits {
		w.Header().Set("Retry-After", fmt.Sprint(max(emulator.SecondsUntil(now, reset), 1)))
		s.fail(w, r, http.StatusTooManyRequests, "Rate limit exceeded", "")
		return
	}
	s.fail(w, r, http.StatusUnauthorized, msg, "")
}

func (d dialect) Fault(w http.ResponseWriter, r *http.Request, f emulator.Fault) {
	s := d.s
	if f.Kind != emulator.FaultRateLimit {
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(emulator.Seconds(f.RetryAfter)))
		}
		msg := http.StatusText(f.Status)
		if f.Status == http.StatusInternalServerError {
			msg = "An unexpected error occurred."
		}
		s.fail(w, r, f.Status, msg, "")
		return
	}
	throttler := f.Throttler
	if throttler == "" {
		throttler = s.throttlerFor(r)
	}
	secs := emulator.Seconds(f.RetryAfter)
	limit := 10000
	if win, ok := s.limits[throttler]; ok {
		limit = win.Limit
	}
	setLimitHeaders(w.Header(), throttler, limit, 0, secs)
	// limits.mdx documents Retry-After-{throttler} on 429; the API's
	// rate-limit-headers util sets a plain Retry-After on the failed-auth
	// path only.
	if throttler == "failed-auth" {
		w.Header().Set("Retry-After", fmt.Sprint(secs))
	} else {
		w.Header().Set("Retry-After-"+throttler, fmt.Sprint(secs))
	}
	s.fail(w, r, http.StatusTooManyRequests, "Rate limit exceeded", "")
}

// throttlerFor names the most specific throttler the real route applies.
func (s *Server) throttlerFor(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, s.base+"/sandbox")
	switch {
	case r.Method == http.MethodPost && (p == "" || p == "/"):
		return "sandbox-create"
	case r.Method == http.MethodDelete && strings.Count(p, "/") == 1:
		return "sandbox-lifecycle"
	case r.Method == http.MethodPost && slices.ContainsFunc([]string{"/start", "/stop", "/archive", "/pause"},
		func(suffix string) bool { return strings.HasSuffix(p, suffix) }):
		return "sandbox-lifecycle"
	}
	return "authenticated"
}
