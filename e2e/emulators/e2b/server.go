// Package e2b emulates the parts of the E2B control-plane API
// (https://api.e2b.app, spec/openapi.yml in e2b-dev/infra) that companion
// uses: the v2 list with state and metadata filters and X-Next-Token
// pagination, create, get, kill, pause, connect (resume), timeout and
// refreshes. The sandbox timeout is a wall-clock TTL on an emulated clock:
// when it fires the sandbox is killed, or paused when created with
// autoPause.
//
// Facts come from ../shared/reference/providers.md §2 and the API's
// handlers; where that is unsure the choice is noted at the spot.
package e2b

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
	// Token and Tokens are the API keys accepted in X-API-Key. With none,
	// every request is refused.
	Token  string
	Tokens []string
	// Clock drives timeouts; nil means a wall clock.
	Clock *emulator.Clock
	// Admin mounts the admin routes under /_emulator/.
	Admin bool
	// MaxTimeout is the team's MaxLengthHours; default 24h (Pro).
	MaxTimeout time.Duration
	// MaxConcurrent caps running sandboxes (create and resume answer 429
	// past it); default 100, negative means no cap.
	MaxConcurrent int
	// AgentServer, when set, serves the requests the sandbox proxy
	// forwards to a sandbox's port 8000 (see proxy.go), with the server's
	// own ResponseWriter, so streaming and WebSocket upgrades pass; nil
	// answers /server_info itself and, like the real proxy when nothing
	// listens, 502 for anything else.
	AgentServer func(sandboxID string) http.Handler
}

// Defaults from the spec and docs.
const (
	DefaultTimeout = 15 * time.Second // NewSandbox.timeout API default (SDKs send 300)
	clientID       = "6532622b"       // the fixed client id the API reports
	envdVersion    = "0.2.0"
)

// Server is an E2B API emulator. It embeds emulator.Base, so Clock,
// Faults, Requests and Close are available on it. Safe for concurrent use.
type Server struct {
	*emulator.Base
	opts    Options
	tokens  emulator.Tokens
	handler http.Handler

	mu    sync.Mutex
	boxes map[string]*Sandbox

	dmu    sync.Mutex // guards domain; never held with mu's callers waiting
	domain string     // sandbox domain for the proxy (SetDomain); "" = none
}

// New returns an emulator configured by o.
func New(o Options) *Server {
	if o.MaxTimeout == 0 {
		o.MaxTimeout = 24 * time.Hour
	}
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = 100
	}
	s := &Server{
		Base:   emulator.NewBase(o.Clock),
		opts:   o,
		tokens: append(emulator.Tokens{o.Token}, o.Tokens...),
		boxes:  map[string]*Sandbox{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/sandboxes", s.listV2)
	mux.HandleFunc("GET /sandboxes", s.listV1)
	mux.HandleFunc("POST /sandboxes", s.create)
	mux.HandleFunc("GET /sandboxes/{sandboxID}", s.get)
	mux.HandleFunc("DELETE /sandboxes/{sandboxID}", s.kill)
	mux.HandleFunc("POST /sandboxes/{sandboxID}/pause", s.pause)
	mux.HandleFunc("POST /sandboxes/{sandboxID}/connect", s.connect)
	mux.HandleFunc("POST /sandboxes/{sandboxID}/resume", s.resume)
	mux.HandleFunc("POST /sandboxes/{sandboxID}/timeout", s.setTimeout)
	mux.HandleFunc("POST /sandboxes/{sandboxID}/refreshes", s.refresh)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, http.StatusNotFound, "Not Found")
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

// fail writes E2B's Error schema: {code, message}.
func (s *Server) fail(w http.ResponseWriter, status int, message string) {
	emulator.WriteJSON(w, status, map[string]any{"code": status, "message": message})
}

func notFoundMsg(id string) string {
	// utils.SandboxNotFoundMsg
	return fmt.Sprintf("Sandbox %q doesn't exist or you don't have access to it", id)
}

type dialect struct{ s *Server }

func (d dialect) Authenticate(r *http.Request) emulator.AuthOutcome {
	return d.s.tokens.CheckHeader(r, "X-API-Key")
}

// Unauthorized answers like the API's security-requirements error path
// (utils/error.go). The exact message text is not in the reference; the
// emulator's is modelled on it.
func (d dialect) Unauthorized(w http.ResponseWriter, r *http.Request, outcome emulator.AuthOutcome) {
	msg := "authorization header is missing"
	if outcome == emulator.AuthInvalid {
		msg = "Invalid API key, please visit https://e2b.dev/docs/api-key for more information."
	}
	d.s.fail(w, http.StatusUnauthorized, msg)
}

func (d dialect) Fault(w http.ResponseWriter, r *http.Request, f emulator.Fault) {
	if f.Kind == emulator.FaultRateLimit {
		// middleware/ratelimit/ratelimit.go: RateLimit-* plus Retry-After on 429.
		secs := emulator.Seconds(f.RetryAfter)
		w.Header().Set("Retry-After", fmt.Sprint(secs))
		w.Header().Set("RateLimit-Limit", "20000")
		w.Header().Set("RateLimit-Remaining", "0")
		w.Header().Set("RateLimit-Reset", fmt.Sprint(secs)) // [uncertain: seconds until reset]
		d.s.fail(w, http.StatusTooManyRequests, "Rate limit exceeded")
		return
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(emulator.Seconds(f.RetryAfter)))
	}
	msg := http.StatusText(f.Status)
	if f.Status == http.StatusInternalServerError {
		msg = "Internal server error"
	}
	d.s.fail(w, f.Status, msg)
}

// settleLocked applies timeouts that fell due up to now: each running
// sandbox whose endAt has passed is killed, or paused (endAt kept as the
// pause time) when it has autoPause. Callers hold s.mu.
func (s *Server) settleLocked() {
	now := s.Clock().Now()
	for id, sb := range s.boxes {
		if sb.State != StateRunning || now.Before(sb.EndAt) {
			continue
		}
		if sb.AutoPause {
			sb.State = StatePaused
			continue
		}
		delete(s.boxes, id)
	}
}

func (s *Server) runningLocked() int {
	n := 0
	for _, sb := range s.boxes {
		if sb.State == StateRunning {
			n++
		}
	}
	return n
}

// concurrencyLocked reports whether one more running sandbox is refused.
func (s *Server) concurrencyLocked(w http.ResponseWriter) bool {
	if s.opts.MaxConcurrent > 0 && s.runningLocked() >= s.opts.MaxConcurrent {
		// orchestrator/create_instance.go answers 429 at the team's limit.
		s.fail(w, http.StatusTooManyRequests, fmt.Sprintf(
			"You have reached the maximum number of concurrent E2B sandboxes (%d). If you need more, please contact us at 'https://e2b.dev/docs/getting-help'",
			s.opts.MaxConcurrent))
		return true
	}
	return false
}

// Seed puts a sandbox straight into the emulator, bypassing the API (for
// "boxes companion did not create"), and returns it as stored. Zero fields
// get defaults: a random id, state running, startedAt now, endAt an hour
// from now for running sandboxes and startedAt for paused ones. It
// panics on a duplicate id or unknown state, which are test bugs.
func (s *Server) Seed(sb Sandbox) Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	now := s.Clock().Now()
	if sb.SandboxID == "" {
		sb.SandboxID = newID()
	}
	if s.boxes[sb.SandboxID] != nil {
		panic("e2b: seed: duplicate sandbox id " + sb.SandboxID)
	}
	if sb.State == "" {
		sb.State = StateRunning
	}
	if sb.State != StateRunning && sb.State != StatePaused {
		panic("e2b: seed: unknown state " + sb.State)
	}
	if sb.TemplateID == "" {
		sb.TemplateID = "base"
	}
	if sb.StartedAt.IsZero() {
		sb.StartedAt = now
	}
	if sb.EndAt.IsZero() {
		sb.EndAt = sb.StartedAt
		if sb.State == StateRunning {
			sb.EndAt = now.Add(time.Hour)
		}
	}
	fillDefaults(&sb)
	stored := sb.clone()
	s.boxes[sb.SandboxID] = &stored
	s.settleLocked()
	return stored.clone()
}

func fillDefaults(sb *Sandbox) {
	if sb.ClientID == "" {
		sb.ClientID = clientID
	}
	if sb.CPUCount == 0 {
		sb.CPUCount = 2
	}
	if sb.MemoryMB == 0 {
		sb.MemoryMB = 512
	}
	if sb.DiskSizeMB == 0 {
		sb.DiskSizeMB = 512
	}
	if sb.EnvdVersion == "" {
		sb.EnvdVersion = envdVersion
	}
	sb.StartedAt = sb.StartedAt.UTC().Truncate(time.Microsecond)
	sb.EndAt = sb.EndAt.UTC().Truncate(time.Microsecond)
}

func newID() string { return emulator.RandomString(20, emulator.LowerAlnum) }

// Sandbox returns the sandbox as of the emulated now.
func (s *Server) Sandbox(id string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	sb, ok := s.boxes[id]
	if !ok {
		return Sandbox{}, false
	}
	return sb.clone(), true
}

// Sandboxes returns every sandbox (running and paused), newest first as
// the list API orders them.
func (s *Server) Sandboxes() []Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	out := make([]Sandbox, 0, len(s.boxes))
	for _, sb := range s.boxes {
		out = append(out, sb.clone())
	}
	slices.SortFunc(out, newestFirst)
	return out
}

// Update lets a test change a stored sandbox directly; it reports whether
// the sandbox exists.
func (s *Server) Update(id string, fn func(*Sandbox)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	sb, ok := s.boxes[id]
	if !ok {
		return false
	}
	fn(sb)
	if sb.SandboxID != id {
		panic("e2b: Update must not change the id")
	}
	s.settleLocked()
	return true
}

// newestFirst orders by startedAt then sandboxID, both descending: the
// keyset the v2 list paginates on.
func newestFirst(a, b Sandbox) int {
	if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
		return c
	}
	return strings.Compare(b.SandboxID, a.SandboxID)
}
