package uibridge

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/agentproxy"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/webhooks"
)

// Config configures a Server. Service, AllowedHosts and a way to
// authenticate (Token or Authenticators) are required.
type Config struct {
	Service *core.Service
	// Token is the per-launch token of desktop mode. It is never logged.
	Token string
	// TokenActor names requests made with Token in the audit trail; ""
	// means core.ActorDesktopToken.
	TokenActor string
	// Authenticators are tried after the token, in order; serve mode adds
	// its login session here.
	Authenticators []Authenticator
	// AllowedHosts are the exact Host header values ("host:port", or a
	// bare host name for the default port) the server answers to; anything else gets 403, which is what stops DNS
	// rebinding. For a loopback listener use LoopbackHosts(port).
	AllowedHosts []string
	// AllowedOrigins are browser origins ("scheme://host[:port]") allowed
	// besides the server's own http://<allowed host>, such as the desktop
	// app's. Each is normalised as NormalizeOrigin does; one that cannot
	// be an origin makes New fail.
	AllowedOrigins []string
	// AgentHTTP reaches boxes' agent-servers (GET /v1/workspaces/{id}/agent);
	// it must apply the endpoint guard (wasm.EndpointClient). nil means a
	// plain client, for tests.
	AgentHTTP *http.Client
	// Version is reported by GET /healthz.
	Version string
	Logger  *slog.Logger

	// MaxBodyBytes limits request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyTimeout bounds the time a request body may take to arrive,
	// counted from when its headers were read; 0 means
	// DefaultBodyTimeout. Header read time and idle keep-alive time are
	// the http.Server's (ReadHeaderTimeout, IdleTimeout).
	BodyTimeout time.Duration
	// PingInterval is how often a stream client is pinged; 0 means 30 s.
	PingInterval time.Duration
	// PongTimeout is how long a ping waits for its pong before the
	// connection is closed; 0 means 20 s.
	PongTimeout time.Duration
	// WriteTimeout bounds one stream message write (a whole snapshot
	// included); 0 means 30 s.
	WriteTimeout time.Duration
	// ClientQueue is how many messages may wait for one stream client
	// before it is closed as a slow consumer; 0 means 1024.
	ClientQueue int
	// FeedBuffer is the buffer of the server's subscription to the core
	// feed; 0 means 8192.
	FeedBuffer int
	// Now is the clock for server_time; nil means Clock's.
	Now func() time.Time
	// Clock times the recheck of stream credentials; nil means
	// core.RealClock.
	Clock core.Clock
	// CredentialRecheck is how often the session or API token of each
	// open stream is checked again, so that streams end when their
	// credential ends elsewhere (see credential.go); 0 means 15 s. Only
	// with Login.
	CredentialRecheck time.Duration
	// Modules enables the routes that install and remove provider
	// modules; nil leaves them out.
	Modules ModuleAdmin
	// ModuleJobs is how many module inspections and installs run at once
	// (see modules.go); 0 means 2.
	ModuleJobs int
	// Login enables serve mode's sign-in (login.go); nil leaves it out.
	Login *Login
	// AgentConns bounds one owner's open connections to agent-servers
	// through the proxy (requests and sockets); 0 means 64.
	AgentConns int
	// AgentMaxBody bounds a request body forwarded to an agent-server; 0
	// means 1 GiB.
	AgentMaxBody int64
	// Metrics serves GET /metrics behind the gate (admins, and API
	// tokens with the metrics scope); nil leaves the route out.
	Metrics http.Handler
	// Webhooks enables the webhook routes and the keep links (serve
	// mode); nil leaves them out.
	Webhooks *webhooks.Hooks
}

// Server is the HTTP API and WebSocket stream over a core.Service. It
// holds no domain logic: it translates requests to Service calls and the
// change feed to stream messages.
type Server struct {
	cfg     Config
	svc     *core.Service
	log     *slog.Logger
	maxBody int64
	handler http.Handler
	hub     *hub
	modJobs chan struct{} // slots for module inspections and installs
	// agents forwards requests to agent-servers; agentCounts streams how
	// many are open per workspace.
	agents      *agentproxy.Proxy
	agentCounts agentCounts

	ctx    context.Context // lives until Close
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	active sync.WaitGroup // stream connections
	conns  map[*websocket.Conn]struct{}

	opened     atomic.Int64 // stream connections opened
	sent       atomic.Int64 // stream messages written
	pongs      atomic.Int64 // pongs received
	pongMissed atomic.Int64 // clients closed for a missed pong
	maxQueue   atomic.Int64 // the longest client queue seen
}

// New returns a Server that follows cfg.Service's change feed until Close.
func New(cfg Config) (*Server, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("uibridge: Config.Service is required")
	}
	cfg.Logger = logger(cfg.Logger)
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.PongTimeout <= 0 {
		cfg.PongTimeout = 20 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.ClientQueue <= 0 {
		cfg.ClientQueue = 1024
	}
	if cfg.FeedBuffer <= 0 {
		cfg.FeedBuffer = 8192
	}
	if cfg.Clock == nil {
		cfg.Clock = core.RealClock{}
	}
	if cfg.Now == nil {
		cfg.Now = cfg.Clock.Now
	}
	if cfg.CredentialRecheck <= 0 {
		cfg.CredentialRecheck = DefaultCredentialRecheck
	}
	if cfg.ModuleJobs <= 0 {
		cfg.ModuleJobs = 2
	}
	s := &Server{
		modJobs: make(chan struct{}, cfg.ModuleJobs),
		cfg:     cfg,
		svc:     cfg.Service,
		log:     cfg.Logger,
		maxBody: cfg.MaxBodyBytes,
		conns:   map[*websocket.Conn]struct{}{},
	}
	s.agents = s.newAgentProxy()
	mux := http.NewServeMux()
	s.routes(newRouter(mux))
	g, err := newGate(cfg, s.recoverer(recordRoute(mux)))
	if err != nil {
		return nil, err
	}
	s.handler = g
	if cfg.Login != nil {
		s.handler = cfg.Login.ingress(g, s.log)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.hub = newHub(cfg.Service.Feed(), s.log, cfg.Now, cfg.ClientQueue, cfg.FeedBuffer)
	s.agentCounts.mu.Lock()
	s.agentCounts.flush = s.hub.pushAgent
	s.agentCounts.mu.Unlock()
	go s.hub.followAccounts(cfg.Service)
	go s.hub.followNotices(cfg.Service)
	if cfg.Login != nil {
		go s.recheckCredentials()
	}
	return s, nil
}

// Handler is the server's root handler, route gate included. Mount it at
// "/" of an http.Server bound to one of the allowed hosts.
func (s *Server) Handler() http.Handler { return s.handler }

// Close ends every stream connection with close code 1001 and stops
// following the feed. HTTP requests in flight are the http.Server's to
// drain (Shutdown does not see hijacked WebSocket connections; Close
// does). Close waits at most a few seconds for peers to answer the close
// handshake, then cuts them off.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()

	s.agents.Close()
	s.hub.close()
	done := make(chan struct{})
	go func() { s.active.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		<-done
	}
	s.cancel()
}

// track counts a stream connection in (+1) or out (-1). It refuses new
// connections once Close has begun.
func (s *Server) track(delta int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if delta > 0 {
		if s.closed {
			return false
		}
		s.active.Add(1)
		return true
	}
	s.active.Done()
	return true
}

func (s *Server) addConn(c *websocket.Conn) {
	s.opened.Add(1)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
}

func (s *Server) removeConn(c *websocket.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// StreamStats is the stream's activity, for metrics.
type StreamStats struct {
	// Clients are connected now; Opened since start; Messages were sent
	// to clients since start; Dropped clients were closed as slow
	// consumers.
	Clients                   int
	Opened, Messages, Dropped int64
}

// StreamStats reports the stream's activity.
func (s *Server) StreamStats() StreamStats {
	s.mu.Lock()
	n := len(s.conns)
	s.mu.Unlock()
	return StreamStats{Clients: n, Opened: s.opened.Load(), Messages: s.sent.Load(), Dropped: s.hub.overflows.Load()}
}

// RouteSetter is a ResponseWriter (of a middleware wrapped around
// Handler) that wants to know the route pattern that served a request:
// SetRoute is called with it ("/v1/workspaces/{id}", never the raw path)
// once the route's handler returned, and not at all for a request no
// route served (the gate refused it, or no route matched). Metrics label
// requests with it. Writers in between are looked through by their
// Unwrap method, as http.ResponseController does.
type RouteSetter interface{ SetRoute(pattern string) }

// recordRoute tells the RouteSetter under w the pattern the mux chose.
func recordRoute(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		if r.Pattern == "" || r.Pattern == "/" { // "/" is the catch-all 404
			return
		}
		for w != nil {
			if rs, ok := w.(RouteSetter); ok {
				rs.SetRoute(r.Pattern)
				return
			}
			u, ok := w.(interface{ Unwrap() http.ResponseWriter })
			if !ok {
				return
			}
			w = u.Unwrap()
		}
	})
}

// recoverer turns a handler panic into a 500 answer and a log line.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				writeJSON(w, http.StatusInternalServerError, s.internal(r, fmt.Errorf("panic: %v", v)))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// router registers handlers by "METHOD /path" like ServeMux, but answers
// a wrong method with a JSON 405 (ServeMux's own is plain text).
type router struct {
	mux   *http.ServeMux
	paths map[string]*methods
}

type methods struct {
	byMethod map[string]http.HandlerFunc
	allow    string
}

func newRouter(mux *http.ServeMux) *router {
	rt := &router{mux: mux, paths: map[string]*methods{}}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErrorCode(w, http.StatusNotFound, codeRouteNotFound, "no such route: "+r.Method+" "+r.URL.Path)
	})
	return rt
}

// any routes every method of path to h (a proxy's route).
func (rt *router) any(path string, h http.HandlerFunc) { rt.mux.HandleFunc(path, h) }

func (rt *router) handle(pattern string, h http.HandlerFunc) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		panic("uibridge: route pattern needs a method: " + pattern)
	}
	m := rt.paths[path]
	if m == nil {
		m = &methods{byMethod: map[string]http.HandlerFunc{}}
		rt.paths[path] = m
		rt.mux.Handle(path, m)
	}
	m.byMethod[method] = h
	if m.allow != "" {
		m.allow += ", "
	}
	m.allow += method
	if method == http.MethodGet {
		m.allow += ", HEAD"
	}
}

func (m *methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	h, ok := m.byMethod[method]
	if !ok {
		w.Header().Set("Allow", m.allow)
		writeErrorCode(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, r.Method+" is not allowed here; allowed: "+m.allow)
		return
	}
	h(w, r)
}
