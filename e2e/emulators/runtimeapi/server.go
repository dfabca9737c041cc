// Package runtimeapi emulates the OpenHands runtime-api, the private
// service behind OpenHands Cloud's remote runtimes, as its public clients
// use it (../shared/reference/providers-wave3.md §1): POST /start,
// GET /list (every user of the key), GET /sessions/{session_id},
// GET /runtime/{runtime_id}, POST /pause, /resume (a new session_api_key;
// the old one stops working) and /stop, all behind X-API-Key.
//
// Each runtime's url is served here in path mode ({base}/{runtime_id}/…,
// §1.8): the agent-server's /alive, /health and /server_info answer
// without auth, everything else wants X-Session-API-Key; a paused
// runtime's url answers 503. The runtime-api's idle reaper runs on the
// emulated clock: a running runtime whose agent-server saw no request for
// IdleAfter is paused. Deleting long-paused runtimes (secondhand, about a
// day) is off unless PausedReapAfter is set, so both readings can be
// tested.
//
// The server is private: wire details no client shows (error bodies,
// the answers of pause and stop) are modelled on FastAPI's defaults and
// marked at the spot.
package runtimeapi

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
	// Clock drives the reaper and start-up; nil means a wall clock.
	Clock *emulator.Clock
	// Admin mounts the admin routes under /_emulator/.
	Admin bool
	// IdleAfter is how long a running runtime's agent-server may see no
	// request before the reaper pauses it; 0 means 20 minutes (§1.6),
	// negative means never.
	IdleAfter time.Duration
	// PausedReapAfter, when positive, stops (deletes) runtimes paused that
	// long (§1.6, secondhand [uncertain]); 0 keeps them.
	PausedReapAfter time.Duration
	// StartDelay keeps a new or resumed runtime "starting" (pod pending)
	// that long on the emulated clock; 0 is instant.
	StartDelay time.Duration
	// EnvKey makes a start take its session_api_key from the environment's
	// OH_SESSION_API_KEYS_0 when given. Whether the runtime-api does so or
	// always injects its own key is [uncertain] (§1.1); the default is its
	// own. A resume rotates the key either way.
	EnvKey bool
	// AgentServer, when set, serves authenticated requests to a running
	// runtime's url (the path after /{runtime_id}); nil answers them 200
	// with {"runtime_id": …}.
	AgentServer func(runtimeID string) http.Handler
}

// DefaultIdleAfter is OpenHands Cloud's idle timeout (§1.6).
const DefaultIdleAfter = 20 * time.Minute

// Runtime statuses (§1.3).
const (
	StatusStarting = "starting"
	StatusRunning  = "running"
	StatusPaused   = "paused"
	StatusStopped  = "stopped"
	StatusError    = "error"
)

// Runtime is one runtime as the emulator stores it.
type Runtime struct {
	RuntimeID     string            `json:"runtime_id"`
	SessionID     string            `json:"session_id"`
	User          string            `json:"user"` // which user of the key started it
	Image         string            `json:"image"`
	Command       string            `json:"command"`
	WorkingDir    string            `json:"working_dir"`
	Environment   map[string]string `json:"environment"`
	Status        string            `json:"status"`
	SessionAPIKey string            `json:"session_api_key"`
	RestartCount  int               `json:"restart_count"`
	CreatedAt     time.Time         `json:"created_at"`
	ReadyAt       time.Time         `json:"ready_at"`      // starting until then
	LastActivity  time.Time         `json:"last_activity"` // the agent-server's last request
	PausedAt      time.Time         `json:"paused_at"`
	// OldKeys are the session keys earlier resumes replaced; the url
	// refuses them.
	OldKeys []string `json:"-"`
}

func (r *Runtime) clone() Runtime {
	c := *r
	c.Environment = map[string]string{}
	for k, v := range r.Environment {
		c.Environment[k] = v
	}
	c.OldKeys = slices.Clone(r.OldKeys)
	return c
}

// Server is a runtime-api emulator. It embeds emulator.Base, so Clock,
// Faults, Requests and Close are available on it. Safe for concurrent use.
type Server struct {
	*emulator.Base
	opts    Options
	tokens  emulator.Tokens
	handler http.Handler

	mu       sync.Mutex
	runtimes map[string]*Runtime // by runtime_id
	base     string              // this server's URL, for runtime urls
}

// New returns an emulator configured by o.
func New(o Options) *Server {
	if o.IdleAfter == 0 {
		o.IdleAfter = DefaultIdleAfter
	}
	s := &Server{
		Base:     emulator.NewBase(o.Clock),
		opts:     o,
		tokens:   append(emulator.Tokens{o.Token}, o.Tokens...),
		runtimes: map[string]*Runtime{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /start", s.start)
	mux.HandleFunc("GET /list", s.list)
	mux.HandleFunc("GET /sessions/{sid}", s.session)
	mux.HandleFunc("GET /runtime/{rid}", s.runtime)
	mux.HandleFunc("POST /pause", s.pause)
	mux.HandleFunc("POST /resume", s.resume)
	mux.HandleFunc("POST /stop", s.stop)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "Not Found")
	})
	var admin http.Handler
	if o.Admin {
		admin = s.adminRoutes()
	}
	s.handler = s.Base.Handler(dialect{s}, mux, admin)
	return s
}

// SetBaseURL sets the URL this server is reached at (the httptest
// server's URL); runtime urls are {base}/{runtime_id}.
func (s *Server) SetBaseURL(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base = strings.TrimRight(u, "/")
}

// Handler serves the API, the runtimes' urls and (with Options.Admin) the
// admin routes.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if strings.HasPrefix(first, runtimeIDPrefix) {
			s.proxy(w, r, first)
			return
		}
		s.handler.ServeHTTP(w, r)
	})
}

// fail writes FastAPI's HTTPException body, {"detail": …} [uncertain: the
// server is private; its clients read only the status].
func fail(w http.ResponseWriter, status int, detail string) {
	emulator.WriteJSON(w, status, map[string]any{"detail": detail})
}

type dialect struct{ s *Server }

func (d dialect) Authenticate(r *http.Request) emulator.AuthOutcome {
	return d.s.tokens.CheckHeader(r, "X-API-Key")
}

func (d dialect) Unauthorized(w http.ResponseWriter, r *http.Request, outcome emulator.AuthOutcome) {
	fail(w, http.StatusUnauthorized, "Invalid API Key")
}

func (d dialect) Fault(w http.ResponseWriter, r *http.Request, f emulator.Fault) {
	if f.Kind == emulator.FaultRateLimit {
		// V0 clients retry 429 with backoff (§1.7); Retry-After is sent as
		// a rate limiter in front of FastAPI would.
		w.Header().Set("Retry-After", fmt.Sprint(emulator.Seconds(f.RetryAfter)))
		fail(w, http.StatusTooManyRequests, "Too Many Requests")
		return
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(emulator.Seconds(f.RetryAfter)))
	}
	fail(w, f.Status, http.StatusText(f.Status))
}

const runtimeIDPrefix = "rt-"

func newRuntimeID() string { return runtimeIDPrefix + emulator.RandomString(16, emulator.LowerAlnum) }
func newKey() string       { return emulator.RandomString(40, emulator.LowerAlnum) }

// settleLocked applies what the clock brought: starting runtimes become
// running, the idle reaper pauses idle ones, and (when set) long-paused
// ones are stopped. Callers hold s.mu.
func (s *Server) settleLocked() {
	now := s.Clock().Now()
	for _, rt := range s.runtimes {
		if rt.Status == StatusStarting && !now.Before(rt.ReadyAt) {
			rt.Status = StatusRunning
			if rt.LastActivity.Before(rt.ReadyAt) {
				rt.LastActivity = rt.ReadyAt
			}
		}
		if rt.Status == StatusRunning && s.opts.IdleAfter > 0 {
			if at := rt.LastActivity.Add(s.opts.IdleAfter); !now.Before(at) {
				rt.Status, rt.PausedAt = StatusPaused, at
			}
		}
		if rt.Status == StatusPaused && s.opts.PausedReapAfter > 0 && !now.Before(rt.PausedAt.Add(s.opts.PausedReapAfter)) {
			rt.Status = StatusStopped
		}
	}
}

// bySessionLocked returns the live runtime of session sid, else the
// newest stopped one, else nil.
func (s *Server) bySessionLocked(sid string) *Runtime {
	var best *Runtime
	for _, rt := range s.runtimes {
		if rt.SessionID != sid {
			continue
		}
		if rt.Status != StatusStopped {
			return rt
		}
		if best == nil || rt.CreatedAt.After(best.CreatedAt) {
			best = rt
		}
	}
	return best
}

func (s *Server) urlLocked(rt *Runtime) string { return s.base + "/" + rt.RuntimeID }

// Seed adds a runtime directly (another user's, say). Zero fields get
// defaults: a runtime id, status running, a session key, now.
func (s *Server) Seed(rt Runtime) Runtime {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Clock().Now()
	if rt.RuntimeID == "" {
		rt.RuntimeID = newRuntimeID()
	}
	if s.runtimes[rt.RuntimeID] != nil {
		panic("runtimeapi: seed: duplicate runtime id " + rt.RuntimeID)
	}
	if rt.SessionID == "" {
		rt.SessionID = emulator.UUID()
	}
	if rt.Status == "" {
		rt.Status = StatusRunning
	}
	if rt.SessionAPIKey == "" {
		rt.SessionAPIKey = newKey()
	}
	if rt.CreatedAt.IsZero() {
		rt.CreatedAt = now
	}
	if rt.LastActivity.IsZero() {
		rt.LastActivity = now
	}
	if rt.Status == StatusPaused && rt.PausedAt.IsZero() {
		rt.PausedAt = now
	}
	stored := rt.clone()
	s.runtimes[rt.RuntimeID] = &stored
	return stored.clone()
}

// Session returns the runtime of session sid as of the emulated now.
func (s *Server) Session(sid string) (Runtime, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	rt := s.bySessionLocked(sid)
	if rt == nil {
		return Runtime{}, false
	}
	return rt.clone(), true
}

// Runtimes returns every runtime, stopped ones included, oldest first.
func (s *Server) Runtimes() []Runtime {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	out := make([]Runtime, 0, len(s.runtimes))
	for _, rt := range s.runtimes {
		out = append(out, rt.clone())
	}
	slices.SortFunc(out, func(a, b Runtime) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.RuntimeID, b.RuntimeID)
	})
	return out
}

// URL returns the url of session sid's runtime (as the API reports it).
func (s *Server) URL(sid string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.bySessionLocked(sid)
	if rt == nil {
		return "", false
	}
	return s.urlLocked(rt), true
}

func (s *Server) adminRoutes() http.Handler {
	a := s.AdminMux()
	a.Handle("GET "+emulator.AdminPrefix+"state", "every runtime, stopped ones included", func(w http.ResponseWriter, r *http.Request) {
		emulator.WriteJSON(w, http.StatusOK, s.Runtimes())
	})
	a.Handle("POST "+emulator.AdminPrefix+"seed", "add a runtime directly (Runtime JSON; e.g. another user's)", func(w http.ResponseWriter, r *http.Request) {
		var rt Runtime
		if err := emulator.DecodeJSON(r, &rt); err != nil {
			emulator.AdminError(w, http.StatusBadRequest, err)
			return
		}
		emulator.WriteJSON(w, http.StatusOK, s.Seed(rt))
	})
	return a
}

// decode reads a JSON body, answering FastAPI's 422 when it is malformed.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := emulator.DecodeJSON(r, v); err != nil {
		fail(w, http.StatusUnprocessableEntity, err.Error())
		return false
	}
	return true
}
