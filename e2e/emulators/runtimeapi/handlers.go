package runtimeapi

import (
	"net/http"
	"strings"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// view is the runtime object the API answers with (§1.2): start, sessions
// and list items. List items carry no pod_status (§1.3).
func (s *Server) viewLocked(rt *Runtime, withPod bool) map[string]any {
	v := map[string]any{
		"runtime_id":      rt.RuntimeID,
		"session_id":      rt.SessionID,
		"status":          rt.Status,
		"url":             s.urlLocked(rt),
		"session_api_key": rt.SessionAPIKey,
	}
	if withPod {
		pod := map[string]string{StatusStarting: "pending", StatusRunning: "ready", StatusPaused: "not found",
			StatusStopped: "not found", StatusError: "failed"}[rt.Status]
		v["pod_status"] = pod
		v["restart_count"] = rt.RestartCount
		v["restart_reasons"] = []string{}
	}
	return v
}

type startReq struct {
	Image          string            `json:"image"`
	Command        any               `json:"command"`
	WorkingDir     string            `json:"working_dir"`
	Environment    map[string]string `json:"environment"`
	SessionID      string            `json:"session_id"`
	ResourceFactor int               `json:"resource_factor"`
	RuntimeClass   string            `json:"runtime_class"`
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	var req startReq
	if !decode(w, r, &req) {
		return
	}
	switch {
	case req.Image == "":
		fail(w, http.StatusUnprocessableEntity, "image: field required")
		return
	case req.SessionID == "":
		fail(w, http.StatusUnprocessableEntity, "session_id: field required")
		return
	case req.ResourceFactor != 0 && req.ResourceFactor != 1 && req.ResourceFactor != 2 && req.ResourceFactor != 4 && req.ResourceFactor != 8:
		fail(w, http.StatusBadRequest, "resource_factor must be 1, 2, 4 or 8")
		return
	}
	cmd, _ := req.Command.(string)
	if _, isList := req.Command.([]any); isList || (req.Command != nil && cmd == "") {
		fail(w, http.StatusUnprocessableEntity, "command: must be a string")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	// A second start for a live session answers with its runtime
	// [uncertain: what the server does is not shown by its clients].
	if rt := s.bySessionLocked(req.SessionID); rt != nil && rt.Status != StatusStopped {
		emulator.WriteJSON(w, http.StatusOK, s.viewLocked(rt, false))
		return
	}
	now := s.Clock().Now()
	rt := &Runtime{
		RuntimeID: newRuntimeID(), SessionID: req.SessionID, User: "key-owner", Image: req.Image, Command: cmd,
		WorkingDir: req.WorkingDir, Environment: req.Environment, SessionAPIKey: newKey(),
		CreatedAt: now, ReadyAt: now.Add(s.opts.StartDelay), LastActivity: now, Status: StatusStarting,
	}
	if k := req.Environment["OH_SESSION_API_KEYS_0"]; s.opts.EnvKey && k != "" {
		rt.SessionAPIKey = k
	}
	s.runtimes[rt.RuntimeID] = rt
	s.settleLocked()
	emulator.WriteJSON(w, http.StatusCreated, s.viewLocked(rt, false))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	// Every user's runtimes; stopped ones are left out (§1.2).
	items := []map[string]any{}
	for _, rt := range s.runtimes {
		if rt.Status != StatusStopped {
			items = append(items, s.viewLocked(rt, false))
		}
	}
	emulator.WriteJSON(w, http.StatusOK, map[string]any{"runtimes": items, "total": len(items)})
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	rt := s.bySessionLocked(r.PathValue("sid"))
	if rt == nil {
		fail(w, http.StatusNotFound, "Session not found")
		return
	}
	v := s.viewLocked(rt, true)
	delete(v, "session_id") // the SaaS manager notes this answer lacks it (§1.2)
	emulator.WriteJSON(w, http.StatusOK, v)
}

func (s *Server) runtime(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	rt := s.runtimes[r.PathValue("rid")]
	if rt == nil {
		fail(w, http.StatusNotFound, "Runtime not found")
		return
	}
	emulator.WriteJSON(w, http.StatusOK, s.viewLocked(rt, true))
}

// target reads {"runtime_id"} and returns that live runtime, or answers
// 404 (unknown or stopped) itself. Callers hold s.mu.
func (s *Server) targetLocked(w http.ResponseWriter, r *http.Request) *Runtime {
	var req struct {
		RuntimeID string `json:"runtime_id"`
	}
	if !decode(w, r, &req) {
		return nil
	}
	s.settleLocked()
	rt := s.runtimes[req.RuntimeID]
	if rt == nil || rt.Status == StatusStopped {
		fail(w, http.StatusNotFound, "Runtime not found")
		return nil
	}
	return rt
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.targetLocked(w, r)
	if rt == nil {
		return
	}
	if rt.Status != StatusPaused {
		rt.Status, rt.PausedAt = StatusPaused, s.Clock().Now()
	}
	// Clients read only the status (§1.2).
	emulator.WriteJSON(w, http.StatusOK, map[string]any{"runtime_id": rt.RuntimeID, "status": rt.Status})
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.targetLocked(w, r)
	if rt == nil {
		return
	}
	if rt.Status == StatusPaused {
		// A new session_api_key; the old one is invalidated (§1.5).
		now := s.Clock().Now()
		rt.OldKeys = append(rt.OldKeys, rt.SessionAPIKey)
		rt.SessionAPIKey = newKey()
		rt.RestartCount++
		rt.Status, rt.ReadyAt, rt.LastActivity, rt.PausedAt = StatusStarting, now.Add(s.opts.StartDelay), now, now
		s.settleLocked()
	}
	emulator.WriteJSON(w, http.StatusOK, s.viewLocked(rt, false))
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.targetLocked(w, r)
	if rt == nil {
		return
	}
	rt.Status = StatusStopped
	emulator.WriteJSON(w, http.StatusOK, map[string]any{"runtime_id": rt.RuntimeID, "status": rt.Status})
}

// proxy serves a runtime's url, /{runtime_id}/…: the agent-server in it.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, rid string) {
	rest := strings.TrimPrefix(r.URL.Path, "/"+rid)
	if rest == "" {
		rest = "/"
	}
	s.mu.Lock()
	s.settleLocked()
	rt := s.runtimes[rid]
	if rt == nil || rt.Status == StatusStopped {
		s.mu.Unlock()
		fail(w, http.StatusNotFound, "Not Found")
		return
	}
	switch rt.Status {
	case StatusPaused:
		// A paused runtime's url answers 503 (§1.5).
		s.mu.Unlock()
		fail(w, http.StatusServiceUnavailable, "Service Unavailable")
		return
	case StatusStarting, StatusError:
		s.mu.Unlock()
		fail(w, http.StatusBadGateway, "Bad Gateway")
		return
	}
	now := s.Clock().Now()
	// Unauthenticated health routes (§1.4).
	switch rest {
	case "/alive", "/health":
		s.mu.Unlock()
		emulator.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	case "/server_info":
		idle := now.Sub(rt.LastActivity).Seconds()
		up := now.Sub(rt.CreatedAt).Seconds()
		s.mu.Unlock()
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"uptime": up, "idle_time": idle,
			"runtime_idle_timeout_seconds": s.opts.IdleAfter.Seconds()})
		return
	}
	// /ready is the agent-server's own probe, answered behind the url:
	// it needs no key and is no activity (agent-server.md).
	probe := rest == "/ready"
	if !probe && !emulator.Tokens([]string{rt.SessionAPIKey}).Accepts(r.Header.Get("X-Session-API-Key")) {
		s.mu.Unlock()
		fail(w, http.StatusUnauthorized, "Invalid session API key")
		return
	}
	if !probe {
		rt.LastActivity = now // work on the agent-server resets its idle time
	}
	agent := s.opts.AgentServer
	s.mu.Unlock()
	if agent != nil {
		r2 := r.Clone(r.Context())
		r2.URL.Path = rest
		agent(rid).ServeHTTP(w, r2)
		return
	}
	emulator.WriteJSON(w, http.StatusOK, map[string]any{"runtime_id": rid, "path": rest})
}
