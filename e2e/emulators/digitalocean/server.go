// Package digitalocean emulates DigitalOcean's hosted-agent ("MARS",
// Harness Runtime) sessions API under /v2/agents — the API Canvas uses and
// companion drives: sessions (list with page tokens, create from a config
// or directly, get, pause, resume, delete, input) and the configs needed
// to create from one. Sessions provision, go idle and are auto-paused
// (pause_reason idle), and are destroyed, on an emulated clock.
//
// Facts come from ../shared/reference/agent-server.md §8 and
// providers.md §4b; where they are unsure the choice is noted at the spot.
package digitalocean

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// ErrorStyle picks the error body shape.
type ErrorStyle int

const (
	// ErrorsSplit (the default) answers 401 and 429, which DigitalOcean's
	// API gateway produces, in the classic {id, message, request_id} shape,
	// and everything the harness API itself refuses in the {error: {code,
	// message}} envelope the Canvas client (mars-api.mjs) parses.
	ErrorsSplit ErrorStyle = iota
	// ErrorsClassic uses {id, message, request_id} everywhere.
	ErrorsClassic
	// ErrorsEnvelope uses {error: {code, message}} everywhere.
	ErrorsEnvelope
)

// Options configure a Server.
type Options struct {
	// Token and Tokens are the accepted "Authorization: Bearer" tokens.
	// With none, every request is refused.
	Token  string
	Tokens []string
	// Clock drives provisioning, idle pause and destruction; nil means a
	// wall clock.
	Clock *emulator.Clock
	// Admin mounts the admin routes under /_emulator/.
	Admin bool
	// TeamID is stamped on sessions and configs; default a random UUID.
	TeamID string
	// Delays is how long each transition takes; nil means DefaultDelays.
	Delays *Delays
	// DefaultIdleTimeout is the deployment-wide idle pause
	// (HARNESS_IDLE_PAUSE_TIMEOUT, value not public): 15 minutes when
	// zero, never when negative.
	DefaultIdleTimeout time.Duration
	// InactivityDestroy is the inactivity policy the session spec says
	// last_event_at drives, which destroys idle sessions (agent-server.md
	// §8; period not published, wording uncertain): a session whose
	// last_event_at is older than this is destroyed, paused or not. Zero
	// means off; SetInactivityDestroy changes it.
	InactivityDestroy time.Duration
	// KeepWarmByDefault makes sessions keep_warm unless their config says
	// otherwise. Canvas notes that the openhands adapter defaults to
	// keep_warm and that the harness then refuses every pause; off by
	// default here so pause works unless a test asks for that behaviour.
	KeepWarmByDefault bool
	// ErrorStyle picks the error body shape; see ErrorStyle.
	ErrorStyle ErrorStyle
	// EnforceRateLimits answers 429 once the hourly (5,000) or per-minute
	// (250) budget is used. Off by default: the ratelimit-* headers are
	// always sent, and tests get 429s deterministically from faults.
	EnforceRateLimits bool
	// AgentServer, when set, serves the requests the ingress proxy
	// forwards to a session's guest port 8000 (see ingress.go), with the
	// server's own ResponseWriter, so streaming and WebSocket upgrades
	// pass; nil answers /server_info itself and 502 for anything else.
	AgentServer func(sessionID string) http.Handler
}

// Delays are the durations of the asynchronous transitions.
type Delays struct {
	Provision, Resume, Destroy time.Duration
}

// DefaultDelays are a few seconds each.
func DefaultDelays() Delays {
	return Delays{Provision: 5 * time.Second, Resume: 3 * time.Second, Destroy: 2 * time.Second}
}

// defaultIdle stands in for HARNESS_IDLE_PAUSE_TIMEOUT [uncertain: value
// not public; 15 min was not found for DigitalOcean either].
const defaultIdle = 15 * time.Minute

// Server is a DigitalOcean hosted-agent sessions emulator. It embeds
// emulator.Base, so Clock, Faults, Requests and Close are available on it.
// Safe for concurrent use.
type Server struct {
	*emulator.Base
	opts    Options
	tokens  emulator.Tokens
	delays  Delays
	idle    time.Duration
	handler http.Handler

	inactivity time.Duration // guarded by mu

	limitsMu sync.Mutex
	limits   map[[32]byte]*budget // per token (by SHA-256): DO's limits are per token

	dmu    sync.Mutex
	domain string // ingress domain (SetIngressDomain); "" = none

	mu       sync.Mutex
	sessions map[string]*entry
	configs  map[string]*configEntry
}

type entry struct {
	s     Session
	until time.Time // when PROVISIONING or DESTROYING settles
	hold  string    // a checkpoint, fork or rollback holding the session; "" when none
	// ingress is the hostname label of the session's published ingress
	// URL; "" until asked for, and again after a pause, lock or delete
	// revokes it. ingressAt is when it was published.
	ingress   string
	ingressAt time.Time
}

// budget is one token's rate-limit windows.
type budget struct {
	hourly, minute *emulator.Window
}

type configEntry struct {
	c       Config
	m       manifest
	deleted bool
}

// New returns an emulator configured by o.
func New(o Options) *Server {
	s := &Server{
		Base:       emulator.NewBase(o.Clock),
		opts:       o,
		tokens:     append(emulator.Tokens{o.Token}, o.Tokens...),
		delays:     DefaultDelays(),
		idle:       o.DefaultIdleTimeout,
		inactivity: o.InactivityDestroy,
		limits:     map[[32]byte]*budget{},
		sessions:   map[string]*entry{},
		configs:    map[string]*configEntry{},
	}
	if o.Delays != nil {
		s.delays = *o.Delays
	}
	if s.idle == 0 {
		s.idle = defaultIdle
	}
	if s.opts.TeamID == "" {
		s.opts.TeamID = emulator.UUID()
	}
	mux := http.NewServeMux()
	const p = "/v2/agents/sessions"
	s.route(mux, "GET "+p, s.list)
	s.route(mux, "POST "+p, s.create)
	s.route(mux, "GET "+p+"/{id}", s.get)
	s.route(mux, "DELETE "+p+"/{id}", s.delete)
	s.route(mux, "POST "+p+"/{id}/pause", s.pause)
	s.route(mux, "POST "+p+"/{id}/resume", s.resume)
	s.route(mux, "POST "+p+"/{id}/input", s.input)
	s.route(mux, "GET "+p+"/{id}/ingress", s.getIngress)
	s.route(mux, "GET /v2/harness-runtime/sessions/{id}/ingress", s.getIngress) // pydo 0.47's name
	const c = "/v2/agents/configs"
	s.route(mux, "GET "+c, s.listConfigs)
	s.route(mux, "POST "+c, s.createConfig)
	s.route(mux, "GET "+c+"/{id}", s.getConfig)
	s.route(mux, "DELETE "+c+"/{id}", s.deleteConfig)
	s.route(mux, "GET "+c+"/{id}/sessions", s.configSessions)
	s.route(mux, "/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, http.StatusNotFound, "The resource you were accessing could not be found.")
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
func (s *Server) Handler() http.Handler { return s.withIngress(s.handler) }

// budgetFor returns the rate-limit windows of the request's token.
func (s *Server) budgetFor(r *http.Request) *budget {
	_, tok, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	key := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	s.limitsMu.Lock()
	defer s.limitsMu.Unlock()
	b, ok := s.limits[key]
	if !ok {
		b = &budget{
			hourly: &emulator.Window{Limit: 5000, Period: time.Hour},
			minute: &emulator.Window{Limit: 250, Period: time.Minute},
		}
		s.limits[key] = b
	}
	return b
}

// route counts the request against its token's rate-limit windows and
// sends the classic ratelimit-* headers (reset is an epoch time).
func (s *Server) route(mux *http.ServeMux, pattern string, h http.HandlerFunc) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		now := s.Clock().Now()
		b := s.budgetFor(r)
		remaining, reset, okHour := b.hourly.Hit(now)
		_, minuteReset, okMinute := b.minute.Hit(now)
		setLimitHeaders(w.Header(), b.hourly.Limit, remaining, reset)
		if s.opts.EnforceRateLimits && (!okHour || !okMinute) {
			until := reset
			if okHour {
				until = minuteReset
			}
			w.Header().Set("Retry-After", fmt.Sprint(max(emulator.SecondsUntil(now, until), 1)))
			s.gatewayFail(w, http.StatusTooManyRequests, "too_many_requests", "API Rate limit exceeded.")
			return
		}
		h(w, r)
	})
}

func setLimitHeaders(h http.Header, limit, remaining int, reset time.Time) {
	h.Set("ratelimit-limit", fmt.Sprint(limit))
	h.Set("ratelimit-remaining", fmt.Sprint(remaining))
	h.Set("ratelimit-reset", fmt.Sprint(reset.Unix()))
}

// envelopeCode maps a status to the code string in {error: {code}}
// [uncertain: the harness's codes are not public; gRPC-style names].
func envelopeCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "FAILED_PRECONDITION"
	case http.StatusLocked:
		return "LOCKED"
	case http.StatusUnsupportedMediaType:
		return "UNSUPPORTED_MEDIA_TYPE"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	return "INTERNAL"
}

// classicID maps a status to the classic error id.
func classicID(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusLocked:
		return "locked"
	case http.StatusTooManyRequests:
		return "too_many_requests"
	case http.StatusServiceUnavailable:
		return "service_unavailable"
	}
	return "server_error"
}

func classicBody(id, message string) map[string]any {
	return map[string]any{"id": id, "message": message, "request_id": emulator.UUID()}
}

func envelopeBody(status int, message string) map[string]any {
	return map[string]any{"error": map[string]any{"code": envelopeCode(status), "message": message}}
}

// fail writes an error the harness API itself produces.
func (s *Server) fail(w http.ResponseWriter, status int, message string) {
	if s.opts.ErrorStyle == ErrorsClassic {
		emulator.WriteJSON(w, status, classicBody(classicID(status), message))
		return
	}
	emulator.WriteJSON(w, status, envelopeBody(status, message))
}

// gatewayFail writes an error DigitalOcean's API gateway produces.
func (s *Server) gatewayFail(w http.ResponseWriter, status int, id, message string) {
	if s.opts.ErrorStyle == ErrorsEnvelope {
		emulator.WriteJSON(w, status, envelopeBody(status, message))
		return
	}
	emulator.WriteJSON(w, status, classicBody(id, message))
}

type dialect struct{ s *Server }

func (d dialect) Authenticate(r *http.Request) emulator.AuthOutcome {
	return d.s.tokens.CheckBearer(r)
}

func (d dialect) Unauthorized(w http.ResponseWriter, r *http.Request, _ emulator.AuthOutcome) {
	d.s.gatewayFail(w, http.StatusUnauthorized, "unauthorized", "Unable to authenticate you")
}

func (d dialect) Fault(w http.ResponseWriter, r *http.Request, f emulator.Fault) {
	s := d.s
	if f.Kind == emulator.FaultRateLimit {
		now := s.Clock().Now()
		secs := emulator.Seconds(f.RetryAfter)
		setLimitHeaders(w.Header(), 5000, 0, now.Add(time.Duration(secs)*time.Second))
		w.Header().Set("Retry-After", fmt.Sprint(secs))
		s.gatewayFail(w, http.StatusTooManyRequests, "too_many_requests", "API Rate limit exceeded.")
		return
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(emulator.Seconds(f.RetryAfter)))
	}
	msg := "Server was unable to give you a response."
	if f.Status != http.StatusInternalServerError {
		msg = http.StatusText(f.Status)
	}
	s.fail(w, f.Status, msg)
}

// --- state machine ---

// idleFor is a session's idle-pause timeout; zero or negative means never.
func (s *Server) idleFor(e *entry) time.Duration {
	if e.s.IdleTimeoutSeconds > 0 {
		return time.Duration(e.s.IdleTimeoutSeconds) * time.Second
	}
	return s.idle
}

// settleLocked brings every session up to now, firing each due event at
// the instant it was due: provisioning and destroying finish, and READY or
// DETACHED sessions without keep_warm are paused (pause_reason idle) once
// last_event_at is older than their idle timeout. Every status change is
// an event on the session's stream, so it moves last_event_at. Callers
// hold s.mu.
func (s *Server) settleLocked() {
	now := s.Clock().Now()
	for _, e := range s.sessions {
		for range 8 {
			at, fire := s.next(e)
			if fire == nil || at.After(now) {
				break
			}
			fire(at)
		}
	}
}

func (s *Server) next(e *entry) (time.Time, func(time.Time)) {
	if !e.until.IsZero() {
		return e.until, func(at time.Time) {
			switch e.s.Status {
			case StatusProvisioning:
				s.setStatus(e, at, StatusReady, "")
			case StatusDestroying:
				s.setStatus(e, at, StatusDestroyed, "")
			}
			e.until = time.Time{}
		}
	}
	var at time.Time
	var fire func(time.Time)
	if idle := s.idleFor(e); idle > 0 && (e.s.Status == StatusReady || e.s.Status == StatusDetached) && !e.s.KeepWarm {
		at, fire = e.s.LastEventAt.Add(idle), func(at time.Time) { s.setStatus(e, at, StatusPaused, PauseIdle) }
	}
	if d := s.inactivity; d > 0 && (e.s.Status == StatusReady || e.s.Status == StatusDetached || e.s.Status == StatusPaused) {
		if del := e.s.LastEventAt.Add(d); fire == nil || del.Before(at) {
			at, fire = del, func(at time.Time) { s.begin(e, at, StatusDestroying, s.delays.Destroy) }
		}
	}
	return at, fire
}

// SetInactivityDestroy sets Options.InactivityDestroy from now on.
func (s *Server) SetInactivityDestroy(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	s.inactivity = d
}

func (s *Server) setStatus(e *entry, at time.Time, status, reason string) {
	e.s.Status = status
	revokeIngress(e)
	e.s.PauseReason = reason
	e.s.LastEventAt = at
}

// revokeIngress drops e's ingress URL when its status ends it: "the same
// URL is returned until pause, lock or rollback. Pause and lock revoke it;
// afterwards a new hostname is issued" (box-endpoints.md §3b), and a
// destroyed session has none. A rollback is not emulated.
func revokeIngress(e *entry) {
	switch e.s.Status {
	case StatusPaused, StatusLocked, StatusDestroying, StatusDestroyed:
		e.ingress = ""
	}
}

// begin puts e into a transitional status for d.
func (s *Server) begin(e *entry, at time.Time, status string, d time.Duration) {
	s.setStatus(e, at, status, "")
	e.until = at.Add(d)
}

// --- Go API for tests ---

// Seed puts a session straight into the emulator, bypassing the API (for
// "sessions companion did not create"), and returns it as stored. Zero
// fields get defaults: a sess_ id, the team id, agent_kind openhands,
// status READY, created_at and last_event_at now. A PROVISIONING or
// DESTROYING session settles after the configured delay. It panics on a
// duplicate id or unknown status, which are test bugs.
func (s *Server) Seed(in Session) Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	now := s.Clock().Now()
	if in.SessionID == "" {
		in.SessionID = newSessionID()
	}
	if s.sessions[in.SessionID] != nil {
		panic("digitalocean: seed: duplicate session " + in.SessionID)
	}
	if in.TeamID == "" {
		in.TeamID = s.opts.TeamID
	}
	if in.AgentKind == "" {
		in.AgentKind = "openhands"
	}
	if in.Status == "" {
		in.Status = StatusReady
	}
	if !slices.Contains(sessionStatuses, in.Status) {
		panic("digitalocean: seed: unknown status " + in.Status)
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = now
	}
	if in.LastEventAt.IsZero() {
		in.LastEventAt = now
	}
	if in.Status == StatusPaused && in.PauseReason == "" {
		in.PauseReason = PauseManual
	}
	e := &entry{s: in}
	switch in.Status {
	case StatusProvisioning:
		e.until = now.Add(s.delays.Provision)
	case StatusDestroying:
		e.until = now.Add(s.delays.Destroy)
	}
	s.sessions[in.SessionID] = e
	s.settleLocked()
	return e.s
}

// SeedConfig stores a config as if created through the API. It panics on
// an invalid manifest or duplicate name.
func (s *Server) SeedConfig(name, manifestYAML string) Config {
	c, err := s.addConfig(name, manifestYAML)
	if err != nil {
		panic("digitalocean: seed config: " + err.Error())
	}
	return c
}

// Session returns a session (destroyed ones included) as of now.
func (s *Server) Session(id string) (Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	e, ok := s.sessions[id]
	if !ok {
		return Session{}, false
	}
	return e.s, true
}

// Sessions returns every session, destroyed ones included, newest first.
func (s *Server) Sessions() []Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	out := make([]Session, 0, len(s.sessions))
	for _, e := range s.sessions {
		out = append(out, e.s)
	}
	slices.SortFunc(out, newestFirst)
	return out
}

// Hold marks a session as held by a checkpoint, fork or rollback in
// progress (what names it); deleting it answers 409 until Release. It
// reports whether the session exists.
func (s *Server) Hold(id, what string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.sessions[id]
	if ok {
		e.hold = what
	}
	return ok
}

// Release ends a Hold.
func (s *Server) Release(id string) {
	s.Hold(id, "")
}

// ErrNotRunning is returned by Touch for a session that cannot have events.
var ErrNotRunning = errors.New("session is not running")

// Touch records an event on a running (PROVISIONING, READY or DETACHED)
// session, as agent output or input would, moving last_event_at and so its
// idle clock.
func (s *Server) Touch(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	e, ok := s.sessions[id]
	if !ok {
		return fmt.Errorf("session %q: not found", id)
	}
	switch e.s.Status {
	case StatusProvisioning, StatusReady, StatusDetached:
		e.s.LastEventAt = s.Clock().Now()
		return nil
	}
	return fmt.Errorf("session %q is %s: %w", id, e.s.Status, ErrNotRunning)
}

// Update lets a test change a stored session directly (say, to DETACHED or
// FAILED); it reports whether the session exists.
func (s *Server) Update(id string, fn func(*Session)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	e, ok := s.sessions[id]
	if !ok {
		return false
	}
	before := e.s.Status
	fn(&e.s)
	if e.s.SessionID != id {
		panic("digitalocean: Update must not change the id")
	}
	if e.s.Status != before {
		revokeIngress(e)
		e.until = time.Time{}
		switch e.s.Status {
		case StatusProvisioning:
			e.until = s.Clock().Now().Add(s.delays.Provision)
		case StatusDestroying:
			e.until = s.Clock().Now().Add(s.delays.Destroy)
		}
	}
	s.settleLocked()
	return true
}

func newSessionID() string { return "sess_" + emulator.RandomString(26, emulator.LowerAlnum) }

// newestFirst orders by created_at then session_id, both descending.
func newestFirst(a, b Session) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(b.SessionID, a.SessionID)
}
