// Package cloudflare emulates the Cloudflare Sandbox SDK's HTTP bridge
// (@cloudflare/sandbox/bridge, the Worker a user deploys;
// ../shared/reference/providers-wave3.md §2): Bearer SANDBOX_API_KEY auth
// on /v1/sandbox*, ids ^[a-z2-7]{1,128}$, {error, code} errors, POST
// /v1/sandbox (an id, nothing stored), DELETE /v1/sandbox/:id (204, never
// allocating), exec as SSE, file read/write, running, persist/hydrate of
// /workspace as a tar (≤ 32 MiB in), tunnels to a container port, and
// the pool's capacity_exceeded 503.
//
// The state machine is the WarmPool's id → container mapping (§2.4):
// every /v1/sandbox/:id/* call but DELETE assigns the id a container,
// starting one when it has none; a container that saw no request for
// SleepAfter (default 10 min, sleepAfter's default) sleeps on the
// emulated clock, and the next call gets a fresh container with an empty
// /workspace and no processes. Whether files survive a sleep is
// [uncertain] (the current docs say lost, an older rendition said kept):
// Options.SleepKeepsFiles picks the older reading.
//
// Each container's "/" is a real directory, <Root>/<container id>, so an
// agent-server process run there (Options.AgentServer, keyed by container
// id) and persist/hydrate see the same files.
package cloudflare

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// Options configure a Server.
type Options struct {
	// Token is the Worker's SANDBOX_API_KEY. Empty skips auth, as the
	// bridge does when the secret is unset (§2.2).
	Token string
	// Clock drives sleeping; nil means a wall clock.
	Clock *emulator.Clock
	// Admin mounts the admin routes under /_emulator/.
	Admin bool
	// Root holds each container's directory; empty makes a temporary one.
	Root string
	// SleepAfter is how long a container may see no request before it
	// sleeps; 0 means 10 minutes (sleepAfter's default), negative never.
	SleepAfter time.Duration
	// SleepKeepsFiles keeps /workspace across a sleep (processes still
	// end): the older docs' reading [uncertain]. Default: files lost.
	SleepKeepsFiles bool
	// MaxInstances caps live containers (WARM_POOL_MAX_INSTANCES); past it
	// a call that needs a new one gets 503 capacity_exceeded. 0: no cap.
	MaxInstances int
	// AgentServer serves tunnel traffic to port 8000 of a container whose
	// agent-server was started (see exec.go), keyed by container id.
	AgentServer func(containerID string) http.Handler
}

// DefaultSleepAfter is sleepAfter's default ("10m", §2.5).
const DefaultSleepAfter = 10 * time.Minute

// MaxTarBytes caps hydrate bodies and file writes (§2.3).
const MaxTarBytes = 32 << 20

// idRE is the bridge's sandbox id rule (§2.2).
var idRE = regexp.MustCompile(`^[a-z2-7]{1,128}$`)

// Container is one container as the emulator keeps it.
type Container struct {
	ID        string    `json:"id"`
	SandboxID string    `json:"sandbox_id"`
	StartedAt time.Time `json:"started_at"`
	// LastActivity is the last request that reached it (API or tunnel).
	LastActivity time.Time `json:"last_activity"`
	// Agent is true once the agent-server was started in it; AgentKey is
	// the OH_SESSION_API_KEYS_0 it was started with.
	Agent    bool           `json:"agent"`
	AgentKey string         `json:"-"`
	Tunnels  map[int]Tunnel `json:"tunnels"`
}

// Tunnel is one tunnel to a container port.
type Tunnel struct {
	ID        string    `json:"id"`
	Port      int       `json:"port"`
	URL       string    `json:"url"`
	Hostname  string    `json:"hostname"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// Server is a bridge emulator. It embeds emulator.Base, so Clock, Faults,
// Requests and Close are available on it. Safe for concurrent use.
type Server struct {
	*emulator.Base
	opts    Options
	handler http.Handler

	mu         sync.Mutex
	containers map[string]*Container // by sandbox id: the current one
	tunnels    map[string]string     // tunnel hostname → sandbox id
	domain     string                // tunnel domain (SetDomain); "" = trycloudflare.com
	sleeps     int                   // containers that slept, for tests
	destroyed  map[string]int        // sandbox id → destroys of a live container
	keptDirs   map[string]string     // sandbox id → slept container whose files stay (SleepKeepsFiles)
}

// New returns an emulator configured by o.
func New(o Options) *Server {
	if o.SleepAfter == 0 {
		o.SleepAfter = DefaultSleepAfter
	}
	if o.Root == "" {
		dir, err := os.MkdirTemp("", "cloudflare-emulator-")
		if err != nil {
			panic(fmt.Sprintf("cloudflare emulator: %v", err))
		}
		o.Root = dir
	}
	s := &Server{Base: emulator.NewBase(o.Clock), opts: o, containers: map[string]*Container{},
		tunnels: map[string]string{}, destroyed: map[string]int{}, keptDirs: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		emulator.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("POST /v1/sandbox", s.create)
	mux.HandleFunc("DELETE /v1/sandbox/{id}", s.destroy)
	mux.HandleFunc("POST /v1/sandbox/{id}/exec", s.withContainer(s.exec))
	mux.HandleFunc("GET /v1/sandbox/{id}/running", s.withContainer(s.running))
	mux.HandleFunc("GET /v1/sandbox/{id}/file/{path...}", s.withContainer(s.readFile))
	mux.HandleFunc("PUT /v1/sandbox/{id}/file/{path...}", s.withContainer(s.writeFile))
	mux.HandleFunc("POST /v1/sandbox/{id}/persist", s.withContainer(s.persist))
	mux.HandleFunc("POST /v1/sandbox/{id}/hydrate", s.withContainer(s.hydrate))
	mux.HandleFunc("POST /v1/sandbox/{id}/tunnel/{port}", s.withContainer(s.openTunnel))
	mux.HandleFunc("DELETE /v1/sandbox/{id}/tunnel/{port}", s.withContainer(s.closeTunnel))
	mux.HandleFunc("GET /v1/pool/stats", s.stats)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "Not Found", "not_found")
	})
	var admin http.Handler
	if o.Admin {
		admin = s.adminRoutes()
	}
	s.handler = s.Base.Handler(dialect{s}, mux, admin)
	return s
}

// Handler serves the API, the tunnels (chosen by Host) and, with
// Options.Admin, the admin routes.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.serveTunnel(w, r) {
			return
		}
		s.handler.ServeHTTP(w, r)
	})
}

// SetDomain makes tunnels http://{tunnel id}.{domain} (host[:port] in
// tests, e.g. "localhost:PORT") instead of https://….trycloudflare.com.
func (s *Server) SetDomain(domain string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.domain = strings.ToLower(domain)
}

// fail writes the bridge's ErrorResponse, {error, code} (types.ts).
func fail(w http.ResponseWriter, status int, msg, code string) {
	emulator.WriteJSON(w, status, map[string]string{"error": msg, "code": code})
}

type dialect struct{ s *Server }

// Authenticate compares "Bearer <key>" (scheme case-insensitive on
// /v1/sandbox*, §2.2); /health needs none, and no key configured means
// no auth at all.
func (d dialect) Authenticate(r *http.Request) emulator.AuthOutcome {
	if d.s.opts.Token == "" || !strings.HasPrefix(r.URL.Path, "/v1/") {
		return emulator.AuthOK
	}
	return emulator.Tokens{d.s.opts.Token}.CheckBearer(r)
}

func (d dialect) Unauthorized(w http.ResponseWriter, r *http.Request, outcome emulator.AuthOutcome) {
	fail(w, http.StatusUnauthorized, "Unauthorized", "unauthorized")
}

func (d dialect) Fault(w http.ResponseWriter, r *http.Request, f emulator.Fault) {
	if f.Kind == emulator.FaultRateLimit {
		// Workers' own rate limiting answers 429 with Retry-After [uncertain:
		// the bridge itself has no limiter].
		w.Header().Set("Retry-After", fmt.Sprint(emulator.Seconds(f.RetryAfter)))
		fail(w, http.StatusTooManyRequests, "Too Many Requests", "rate_limited")
		return
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(emulator.Seconds(f.RetryAfter)))
	}
	code := "internal_error"
	if f.Status == http.StatusServiceUnavailable {
		code = "capacity_exceeded"
	}
	fail(w, f.Status, http.StatusText(f.Status), code)
}
