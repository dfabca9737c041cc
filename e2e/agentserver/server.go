package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Version is what /server_info reports for the server and SDK packages. It
// names the SDK release the reference was read from, marked as an emulator.
const Version = "1.43.1+emulator"

// Config is the emulator's configuration. The zero value serves an open
// (keyless) API with conversations under workspace/conversations.
type Config struct {
	// Keys are the valid X-Session-API-Key values; none means /api/* is open.
	Keys []string
	// ConversationsPath is where conversations persist.
	ConversationsPath string
	// BashEventsDir is where bash events persist (OH_BASH_EVENTS_DIR);
	// empty means bash_events beside ConversationsPath, which is
	// upstream's workspace/bash_events under the default paths.
	BashEventsDir string
	// SocketAuthTimeout is how long a socket waits for its first-message
	// auth frame; zero means upstream's 10 s.
	SocketAuthTimeout time.Duration
	// RuntimeIdleTimeout is reported as runtime_idle_timeout_seconds when > 0.
	RuntimeIdleTimeout float64
	BuildGitSHA        string
	BuildGitRef        string
	// ReadyDelay keeps /ready at 503 this long after start.
	ReadyDelay time.Duration
	// IdleAtStart backdates the idle clock at start, so a test sees a box
	// that has been idle this long without waiting for it on the wall
	// clock (companion does not own the clock inside a container).
	IdleAtStart time.Duration
	// PureGit makes git-delta use the built-in Go implementation even when
	// a git binary is present (EMULATOR_PURE_GIT=1), as in the box image.
	PureGit bool
	// SeedRepo, when set, is a directory made a real git repository with
	// uncommitted work at start (EMULATOR_SEED_REPO), unless it has one.
	// Under FSRoot an absolute SeedRepo is a box path.
	SeedRepo string
	// FSRoot, when set, stands for the box's "/" (EMULATOR_FS_ROOT): the
	// absolute paths requests name are taken under it, and the paths the
	// emulator answers with are written as the box sees them.
	FSRoot string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ConfigFromEnv reads the configuration the way the agent-server does.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{
		ConversationsPath: "workspace/conversations",
		BuildGitSHA:       "unknown",
		BuildGitRef:       "unknown",
	}
	for i := 0; ; i++ {
		k := getenv("OH_SESSION_API_KEYS_" + strconv.Itoa(i))
		if k == "" {
			break
		}
		cfg.Keys = append(cfg.Keys, k)
	}
	if v := getenv("OH_SESSION_API_KEYS"); v != "" {
		var list []string
		if err := json.Unmarshal([]byte(v), &list); err != nil {
			return cfg, fmt.Errorf("OH_SESSION_API_KEYS: want a JSON list of strings: %w", err)
		}
		cfg.Keys = append(cfg.Keys, list...)
	}
	if v := getenv("SESSION_API_KEY"); v != "" {
		cfg.Keys = append(cfg.Keys, v)
	}
	if v := getenv("OH_CONVERSATIONS_PATH"); v != "" {
		cfg.ConversationsPath = v
	}
	cfg.BashEventsDir = getenv("OH_BASH_EVENTS_DIR")
	if v := getenv("OH_RUNTIME_IDLE_TIMEOUT_SECONDS"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return cfg, fmt.Errorf("OH_RUNTIME_IDLE_TIMEOUT_SECONDS=%q: want a number", v)
		}
		if f > 0 {
			cfg.RuntimeIdleTimeout = f
		}
	}
	if v := getenv("OPENHANDS_BUILD_GIT_SHA"); v != "" {
		cfg.BuildGitSHA = v
	}
	if v := getenv("OPENHANDS_BUILD_GIT_REF"); v != "" {
		cfg.BuildGitRef = v
	}
	cfg.PureGit = getenv("EMULATOR_PURE_GIT") == "1"
	cfg.SeedRepo = getenv("EMULATOR_SEED_REPO")
	cfg.FSRoot = getenv("EMULATOR_FS_ROOT")
	d, err := envSeconds(getenv, "EMULATOR_READY_DELAY_SECONDS")
	if err != nil {
		return cfg, err
	}
	cfg.ReadyDelay = d
	if cfg.IdleAtStart, err = envSeconds(getenv, "EMULATOR_IDLE_AT_START_SECONDS"); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// Server is the emulator's HTTP handler.
type Server struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	start time.Time
	mux   *http.ServeMux
	store *store
	bash  *bashEvents
	root  fsRoot

	mu        sync.Mutex
	lastEvent time.Time // the process-wide idle clock

	sockets sockets
}

// NewServer loads the persisted conversations and returns a ready handler.
func NewServer(cfg Config, log *slog.Logger) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ConversationsPath == "" {
		cfg.ConversationsPath = "workspace/conversations"
	}
	if cfg.BashEventsDir == "" {
		cfg.BashEventsDir = filepath.Join(filepath.Dir(cfg.ConversationsPath), "bash_events")
	}
	if cfg.SocketAuthTimeout <= 0 {
		cfg.SocketAuthTimeout = firstMessageAuthTimeout
	}
	if cfg.BuildGitSHA == "" {
		cfg.BuildGitSHA = "unknown"
	}
	if cfg.BuildGitRef == "" {
		cfg.BuildGitRef = "unknown"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	root, err := newFSRoot(cfg.FSRoot)
	if err != nil {
		return nil, err
	}
	if cfg.SeedRepo != "" {
		dir := cfg.SeedRepo
		if root.mapped() && filepath.IsAbs(dir) {
			if dir, err = root.host(dir); err != nil {
				return nil, fmt.Errorf("seed repository %s: %w", cfg.SeedRepo, err)
			}
		}
		if err := seedRepo(dir, cfg.Now()); err != nil {
			return nil, fmt.Errorf("seed repository %s: %w", cfg.SeedRepo, err)
		}
	}
	st, err := openStore(cfg.ConversationsPath, log)
	if err != nil {
		return nil, err
	}
	now := cfg.Now()
	s := &Server{cfg: cfg, log: log, now: cfg.Now, start: now, lastEvent: now.Add(-cfg.IdleAtStart), store: st, root: root,
		bash: newBashEvents(cfg.BashEventsDir, log), mux: http.NewServeMux()}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	handle := func(method, path string, h http.HandlerFunc) {
		s.mux.HandleFunc(method+" "+path, h)
	}
	handle("GET", "/server_info", s.serverInfo)
	handle("GET", "/{$}", s.serverInfo)
	handle("GET", "/alive", s.ok)
	handle("GET", "/health", s.ok)
	handle("GET", "/ready", s.ready)

	handle("POST", "/api/conversations", s.api(s.startConversation))
	handle("GET", "/api/conversations", s.api(s.batchGet))
	handle("GET", "/api/conversations/search", s.api(s.search))
	handle("GET", "/api/conversations/count", s.api(s.count))
	handle("GET", "/api/conversations/{id}", s.api(s.getConversation))
	handle("PATCH", "/api/conversations/{id}", s.api(s.updateConversation))
	handle("DELETE", "/api/conversations/{id}", s.api(s.deleteConversation))
	handle("POST", "/api/conversations/{id}/pause", s.api(s.pauseConversation))
	handle("POST", "/api/conversations/{id}/events", s.api(s.sendMessage))
	handle("GET", "/api/file/download-trajectory/{id}", s.api(s.downloadTrajectory))
	handle("GET", "/api/file/archive", s.api(s.archive))
	handle("GET", "/api/file/download", s.api(s.download))
	handle("POST", "/api/file/upload", s.api(s.upload))
	handle("POST", "/api/file/create_directory", s.api(s.createDirectory))
	handle("GET", "/api/file/search_subdirs", s.api(s.searchSubdirs))
	handle("GET", "/api/file/home", s.api(s.home))
	handle("POST", "/api/bash/execute_bash_command", s.api(s.executeBash))
	handle("POST", "/api/bash/start_bash_command", s.api(s.startBash))

	// Any method: a request that is not a WebSocket handshake gets 404, as
	// from a router with only WebSocket routes there. No auth wrapper:
	// the sockets check keys their own way.
	s.mux.HandleFunc("/sockets/events/{id}", s.eventsSocket)
	s.mux.HandleFunc("/sockets/bash-events", s.bashEventsSocket)
}

// ServeHTTP logs each request (probes at debug level: they are polled).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	// Handler only finds the route; ServeHTTP also sets the path values.
	if h, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(sw, r)
	} else {
		notRouted(sw, r, h)
	}
	level := slog.LevelInfo
	if !strings.HasPrefix(r.URL.Path, "/api/") && !strings.HasPrefix(r.URL.Path, "/sockets/") {
		level = slog.LevelDebug
	}
	s.log.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
		"dur", time.Since(t0).Round(time.Microsecond))
}

// notRouted answers a request no route takes as FastAPI does, before any
// auth check: 405 {"detail":"Method Not Allowed"} for a known path with
// another method, else 404 {"detail":"Not Found"}. h is the mux's own
// answer, which tells the two apart.
func notRouted(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	h.ServeHTTP(rec, r)
	if rec.code == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", rec.header.Get("Allow"))
		writeJSON(w, http.StatusMethodNotAllowed, detail("Method Not Allowed"))
		return
	}
	writeJSON(w, http.StatusNotFound, detail("Not Found"))
}

// recorder keeps only the status and headers of a response.
type recorder struct {
	header http.Header
	code   int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(code int)        { r.code = code }

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Hijack hands the connection to a socket; the status logged is 101
// unless the socket code notes another (a refused handshake).
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("response writer cannot be hijacked")
	}
	w.status = http.StatusSwitchingProtocols
	return h.Hijack()
}

func (w *statusWriter) noteStatus(code int) { w.status = code }

// api guards an /api/* route: X-Session-API-Key must match one configured
// key. Bearer tokens and query parameters are not accepted, as upstream.
func (s *Server) api(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if len(s.cfg.Keys) > 0 && !s.validKey(r.Header.Get("X-Session-API-Key")) {
			writeJSON(w, http.StatusUnauthorized, detail("Unauthorized"))
			return
		}
		h(w, r)
	}
}

func (s *Server) validKey(got string) bool {
	if got == "" {
		return false
	}
	ok := false
	for _, k := range s.cfg.Keys {
		if subtle.ConstantTimeCompare([]byte(got), []byte(k)) == 1 {
			ok = true
		}
	}
	return ok
}

// touch resets the idle clock: called for conversation events and for the
// bash and file routes upstream counts as activity, never for reads.
func (s *Server) touch() time.Time {
	now := s.now()
	s.mu.Lock()
	s.lastEvent = now
	s.mu.Unlock()
	return now
}

// pyFloat is a float64 that serializes like Python's json module: a whole
// number keeps its ".0", so clients see what the real server sends.
type pyFloat float64

func (f pyFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil, fmt.Errorf("unsupported float %v", v)
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e16 {
		return []byte(strconv.FormatFloat(v, 'f', 1, 64)), nil
	}
	return []byte(strconv.FormatFloat(v, 'g', -1, 64)), nil
}

type serverInfo struct {
	Uptime                      pyFloat  `json:"uptime"`
	IdleTime                    pyFloat  `json:"idle_time"`
	Title                       string   `json:"title"`
	Version                     string   `json:"version"`
	SDKVersion                  string   `json:"sdk_version"`
	ToolsVersion                string   `json:"tools_version"`
	WorkspaceVersion            string   `json:"workspace_version"`
	BuildGitSHA                 string   `json:"build_git_sha"`
	BuildGitRef                 string   `json:"build_git_ref"`
	PythonVersion               string   `json:"python_version"`
	UsableTools                 []string `json:"usable_tools"`
	RuntimeIdleTimeoutSeconds   *pyFloat `json:"runtime_idle_timeout_seconds"`
	Capabilities                []string `json:"capabilities"`
	MaxForegroundTerminalTimout *pyFloat `json:"max_foreground_terminal_timeout_seconds"`
	Docs                        string   `json:"docs"`
	Redoc                       string   `json:"redoc"`
	ConversationRuntime         string   `json:"conversation_runtime"`
}

// serverInfo never touches the idle clock: status probes are not activity.
func (s *Server) serverInfo(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	s.mu.Lock()
	last := s.lastEvent
	s.mu.Unlock()
	info := serverInfo{
		// Upstream computes int(now - t): whole seconds.
		Uptime:           pyFloat(math.Max(0, math.Trunc(now.Sub(s.start).Seconds()))),
		IdleTime:         pyFloat(math.Max(0, math.Trunc(now.Sub(last).Seconds()))),
		Title:            "OpenHands Agent Server",
		Version:          Version,
		SDKVersion:       Version,
		ToolsVersion:     Version,
		WorkspaceVersion: Version,
		BuildGitSHA:      s.cfg.BuildGitSHA,
		BuildGitRef:      s.cfg.BuildGitRef,
		PythonVersion:    "emulator",
		UsableTools:      []string{"terminal", "file_editor", "task_tracker"},
		Capabilities: []string{
			"credential_binding_v1",
			"credential_binding_readiness_probe_v1",
			"credential_binding_activation_guard_v1",
			"idempotent_conversation_create_v1",
		},
		Docs:                "/docs",
		Redoc:               "/redoc",
		ConversationRuntime: "local",
	}
	if t := s.cfg.RuntimeIdleTimeout; t > 0 {
		v, fg := pyFloat(t), pyFloat(0.9*t)
		info.RuntimeIdleTimeoutSeconds, info.MaxForegroundTerminalTimout = &v, &fg
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) ok(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.now().Sub(s.start) < s.cfg.ReadyDelay {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{
			"status": "initializing", "message": "Server is still initializing",
		})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// maxBody bounds JSON request bodies; the emulator has no use for large
// ones. Uploads are streamed and not bounded.
const maxBody = 1 << 20

// readBody decodes a JSON body into v, answering 422 as FastAPI would when
// it is not valid JSON.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, validation("json_invalid", []any{"body"}, "JSON decode error: "+err.Error(), nil))
		return false
	}
	return true
}

// writeJSON answers v as JSON. As Python's json module, it leaves <, >
// and & as they are.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"detail": "Internal Server Error", "exception": err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func detail(msg string) map[string]string { return map[string]string{"detail": msg} }

// validation is FastAPI's 422 body: {"detail":[{type,loc,msg,input}]}.
func validation(typ string, loc []any, msg string, input any) map[string]any {
	return map[string]any{"detail": []map[string]any{{"type": typ, "loc": loc, "msg": msg, "input": input}}}
}

func internalError(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": "Internal Server Error", "exception": err.Error()})
}

// httpError answers a route's HTTPException as upstream's handler renders
// it: {"detail": msg} below 500; from 500 up the detail is hidden behind
// "Internal Server Error" and the exception is str() of the HTTPException,
// "<status>: <msg>".
func httpError(w http.ResponseWriter, status int, msg string) {
	if status < 500 {
		writeJSON(w, status, detail(msg))
		return
	}
	writeJSON(w, status, map[string]string{"detail": "Internal Server Error", "exception": fmt.Sprintf("%d: %s", status, msg)})
}

// unhandled answers an exception no route caught, as upstream's catch-all
// handler does: 500 with str() of the exception and a fresh error_id.
func unhandled(w http.ResponseWriter, exception string) {
	writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": "Internal Server Error",
		"exception": exception, "error_id": randomHex(16)})
}

// randomHex is Python's secrets.token_hex(n).
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// eventTime is an event's timestamp as the SDK stamps it:
// datetime.now().isoformat(), a naive local time with microseconds, or
// none when they are zero. Conversation events (not bash events) carry it,
// and resend_mode=since compares these strings.
func eventTime(t time.Time) string {
	t = t.Local().Truncate(time.Microsecond)
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04:05")
	}
	return t.Format("2006-01-02T15:04:05.000000")
}

// pyTime formats t as pydantic does for a UTC datetime: microseconds, or
// none when they are zero, and a Z suffix.
func pyTime(t time.Time) string {
	t = t.UTC().Truncate(time.Microsecond)
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04:05Z")
	}
	return t.Format("2006-01-02T15:04:05.000000Z")
}
