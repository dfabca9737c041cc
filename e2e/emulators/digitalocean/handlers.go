package digitalocean

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// --- sessions: list ---

func pageToken(s Session) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%d|%s", s.CreatedAt.UnixNano(), s.SessionID)))
}

func parsePageToken(tok string) (time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return time.Time{}, "", err
	}
	ns, id, ok := strings.Cut(string(raw), "|")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || !strings.HasPrefix(id, "sess_") {
		return time.Time{}, "", errors.New("malformed page token")
	}
	return time.Unix(0, n).UTC(), id, nil
}

// pageSize reads page_size: default 20, at most 100 [uncertain: the
// reference gives neither; larger values are clamped as gRPC-gateway
// services usually do].
func pageSize(v string) (int, error) {
	if v == "" {
		return 20, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errors.New("page_size must be a non-negative integer")
	}
	if n == 0 {
		return 20, nil
	}
	return min(n, 100), nil
}

// statusFilter reads ?status= (repeated or comma-separated). Without one,
// or with UNSPECIFIED, every session but DESTROYED is listed; ALL lists
// destroyed ones too.
func statusFilter(vals []string) (func(string) bool, error) {
	var want []string
	all := false
	for _, v := range vals {
		for st := range strings.SplitSeq(v, ",") {
			st = strings.TrimSpace(st)
			switch {
			case st == "" || st == StatusUnspecified:
			case st == StatusAll:
				all = true
			case slices.Contains(sessionStatuses, st):
				want = append(want, st)
			default:
				return nil, fmt.Errorf("invalid status %q", st)
			}
		}
	}
	switch {
	case all:
		return func(string) bool { return true }, nil
	case len(want) > 0:
		return func(st string) bool { return slices.Contains(want, st) }, nil
	}
	return func(st string) bool { return st != StatusDestroyed }, nil
}

// list serves GET /v2/agents/sessions → {sessions, next_page_token},
// newest first; next_page_token is absent on the last page.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	size, err := pageSize(q.Get("page_size"))
	if err != nil {
		s.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	keep, err := statusFilter(q["status"])
	if err != nil {
		s.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	var afterTime time.Time
	var afterID string
	if v := q.Get("page_token"); v != "" {
		afterTime, afterID, err = parsePageToken(v)
		if err != nil {
			s.fail(w, http.StatusBadRequest, "invalid page_token")
			return
		}
	}
	name, parent := q.Get("name"), q.Get("parent_session_id")
	s.mu.Lock()
	s.settleLocked()
	var out []Session
	for _, e := range s.sessions {
		if !keep(e.s.Status) || name != "" && e.s.Name != name || parent != "" && e.s.ParentSessionID != parent {
			continue
		}
		out = append(out, e.s)
	}
	s.mu.Unlock()
	s.writePage(w, out, size, afterTime, afterID)
}

func (s *Server) writePage(w http.ResponseWriter, out []Session, size int, afterTime time.Time, afterID string) {
	slices.SortFunc(out, newestFirst)
	if afterID != "" {
		out = slices.DeleteFunc(out, func(x Session) bool {
			if c := x.CreatedAt.Compare(afterTime); c != 0 {
				return c > 0
			}
			return x.SessionID >= afterID
		})
	}
	body := map[string]any{}
	if len(out) > size {
		out = out[:size]
		body["next_page_token"] = pageToken(out[size-1])
	}
	if out == nil {
		out = []Session{}
	}
	body["sessions"] = out
	emulator.WriteJSON(w, http.StatusOK, body)
}

// --- sessions: create ---

type createBody struct {
	Name               string `json:"name"`
	ConfigID           string `json:"config_id"`
	AgentKind          string `json:"agent_kind"`
	RepoHint           string `json:"repo_hint"`
	IdleTimeoutSeconds *int   `json:"idle_timeout_seconds"`
	Origin             string `json:"origin"`
	KeepWarm           *bool  `json:"keep_warm"`
}

// create serves POST /v2/agents/sessions with JSON {name, config_id} or
// {agent_kind, repo_hint, idle_timeout_seconds, origin}, or a YAML
// manifest (application/x-yaml). It answers 201 {session} in PROVISIONING
// [uncertain: 200 or 201; configs answer 201].
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var body createBody
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/x-yaml", "application/yaml", "text/yaml":
		raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			s.fail(w, http.StatusBadRequest, "reading manifest: "+err.Error())
			return
		}
		m, err := parseManifest(string(raw))
		if err != nil {
			s.fail(w, http.StatusBadRequest, err.Error())
			return
		}
		body = createBody{Name: m.Name, AgentKind: m.Agent, KeepWarm: m.KeepWarm}
		if m.IdleTimeout > 0 {
			body.IdleTimeoutSeconds = &m.IdleTimeout
		}
	case "", "application/json":
		if err := emulator.DecodeJSON(r, &body); err != nil {
			s.fail(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
			return
		}
	default:
		s.fail(w, http.StatusUnsupportedMediaType, "unsupported content type "+mt)
		return
	}
	if body.IdleTimeoutSeconds != nil && *body.IdleTimeoutSeconds < 0 {
		s.fail(w, http.StatusBadRequest, "idle_timeout_seconds must not be negative")
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	now := s.Clock().Now()
	sess := Session{
		SessionID: newSessionID(),
		Name:      body.Name,
		TeamID:    s.opts.TeamID,
		AgentKind: body.AgentKind,
		CreatedAt: now,
		KeepWarm:  s.opts.KeepWarmByDefault,
		RepoHint:  body.RepoHint,
		Origin:    body.Origin,
	}
	if body.ConfigID != "" {
		ce, ok := s.configs[body.ConfigID]
		if !ok || ce.deleted {
			s.fail(w, http.StatusNotFound, fmt.Sprintf("config %s not found", body.ConfigID))
			return
		}
		sess.ConfigID = body.ConfigID
		sess.AgentKind = ce.m.Agent
		if ce.m.KeepWarm != nil {
			sess.KeepWarm = *ce.m.KeepWarm
		}
		sess.IdleTimeoutSeconds = ce.m.IdleTimeout
	} else if body.AgentKind == "" {
		s.fail(w, http.StatusBadRequest, "one of config_id or agent_kind is required")
		return
	}
	if body.KeepWarm != nil {
		sess.KeepWarm = *body.KeepWarm
	}
	if body.IdleTimeoutSeconds != nil {
		sess.IdleTimeoutSeconds = *body.IdleTimeoutSeconds
	}
	e := &entry{s: sess}
	s.begin(e, now, StatusProvisioning, s.delays.Provision)
	s.sessions[sess.SessionID] = e
	s.settleLocked()
	emulator.WriteJSON(w, http.StatusCreated, map[string]any{"session": e.s})
}

// --- sessions: one ---

func (s *Server) withSession(w http.ResponseWriter, r *http.Request, fn func(e *entry)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	id := r.PathValue("id")
	e, ok := s.sessions[id]
	if !ok {
		s.fail(w, http.StatusNotFound, fmt.Sprintf("session %s not found", id))
		return
	}
	fn(e)
}

// get serves GET /v2/agents/sessions/{id} → {session}; destroyed sessions
// are still returned, with status DESTROYED.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.withSession(w, r, func(e *entry) {
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"session": e.s})
	})
}

// pause serves POST …/{id}/pause → 204; 409 unless READY or DETACHED, and
// for keep_warm sessions, which the harness refuses to pause.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	s.withSession(w, r, func(e *entry) {
		if e.s.Status != StatusReady && e.s.Status != StatusDetached {
			s.fail(w, http.StatusConflict, fmt.Sprintf("session is %s; only READY or DETACHED sessions can be paused", e.s.Status))
			return
		}
		if e.s.KeepWarm {
			s.fail(w, http.StatusConflict, "session is keep_warm; pause refused")
			return
		}
		s.setStatus(e, s.Clock().Now(), StatusPaused, PauseManual)
		w.WriteHeader(http.StatusNoContent)
	})
}

// resume serves POST …/{id}/resume → 204; 409 unless PAUSED. The session
// goes through PROVISIONING back to READY, which is why Canvas polls for
// READY after resuming [uncertain: the interim status].
func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	s.withSession(w, r, func(e *entry) {
		if e.s.Status != StatusPaused {
			s.fail(w, http.StatusConflict, fmt.Sprintf("session is %s; only PAUSED sessions can be resumed", e.s.Status))
			return
		}
		s.begin(e, s.Clock().Now(), StatusProvisioning, s.delays.Resume)
		s.settleLocked()
		w.WriteHeader(http.StatusNoContent)
	})
}

// delete serves DELETE /v2/agents/sessions/{id} → 204: DESTROYING, then
// DESTROYED. Deleting a session already on its way out is a no-op 204; a
// staff-locked session is 423 and one held by a checkpoint, fork or
// rollback 409 (mars-api.mjs).
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	s.withSession(w, r, func(e *entry) {
		if e.s.Status == StatusLocked {
			s.fail(w, http.StatusLocked, "session is locked by DigitalOcean staff; it cannot be deleted")
			return
		}
		if e.hold != "" && e.s.Status != StatusDestroying && e.s.Status != StatusDestroyed {
			s.fail(w, http.StatusConflict, fmt.Sprintf("session is held by a %s in progress; delete it once that finishes", e.hold))
			return
		}
		if e.s.Status != StatusDestroying && e.s.Status != StatusDestroyed {
			s.begin(e, s.Clock().Now(), StatusDestroying, s.delays.Destroy)
			s.settleLocked()
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// input serves POST …/{id}/input: a message to the agent, which is an
// event on the session's stream and so resets its idle clock. 202, 409
// unless READY or DETACHED [uncertain: the status code].
func (s *Server) input(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := emulator.DecodeJSON(r, &body); err != nil {
		s.fail(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	s.withSession(w, r, func(e *entry) {
		if e.s.Status != StatusReady && e.s.Status != StatusDetached {
			s.fail(w, http.StatusConflict, fmt.Sprintf("session is %s; input needs a READY or DETACHED session", e.s.Status))
			return
		}
		e.s.LastEventAt = s.Clock().Now()
		w.WriteHeader(http.StatusAccepted)
	})
}

// --- configs ---

func (s *Server) addConfig(name, manifestYAML string) (Config, error) {
	if name == "" {
		return Config{}, errors.New("name is required")
	}
	m, err := parseManifest(manifestYAML)
	if err != nil {
		return Config{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ce := range s.configs {
		if ce.c.Name == name && !ce.deleted {
			return Config{}, errDuplicate
		}
	}
	c := Config{ConfigID: emulator.UUID(), Name: name, TeamID: s.opts.TeamID, ManifestYAML: manifestYAML, CreatedAt: s.Clock().Now()}
	s.configs[c.ConfigID] = &configEntry{c: c, m: m}
	return c, nil
}

var errDuplicate = errors.New("a config with that name already exists")

// createConfig serves POST /v2/agents/configs {name, manifest_yaml} →
// 201 {config}; 409 on a duplicate name.
func (s *Server) createConfig(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name         string `json:"name"`
		ManifestYAML string `json:"manifest_yaml"`
	}
	if err := emulator.DecodeJSON(r, &body); err != nil {
		s.fail(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	c, err := s.addConfig(body.Name, body.ManifestYAML)
	switch {
	case errors.Is(err, errDuplicate):
		s.fail(w, http.StatusConflict, err.Error())
	case err != nil:
		s.fail(w, http.StatusBadRequest, err.Error())
	default:
		emulator.WriteJSON(w, http.StatusCreated, map[string]any{"config": c})
	}
}

// listConfigs serves GET /v2/agents/configs → {configs, next_page_token};
// all configs fit on one page here.
func (s *Server) listConfigs(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	out := []Config{}
	for _, ce := range s.configs {
		if !ce.deleted {
			out = append(out, ce.c)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Config) int { return strings.Compare(a.Name, b.Name) })
	emulator.WriteJSON(w, http.StatusOK, map[string]any{"configs": out})
}

func (s *Server) withConfig(w http.ResponseWriter, r *http.Request, fn func(ce *configEntry)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("id")
	ce, ok := s.configs[id]
	if !ok || ce.deleted {
		s.fail(w, http.StatusNotFound, fmt.Sprintf("config %s not found", id))
		return
	}
	fn(ce)
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) {
	s.withConfig(w, r, func(ce *configEntry) {
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"config": ce.c})
	})
}

// deleteConfig soft-deletes: sessions made from it keep their config_id.
func (s *Server) deleteConfig(w http.ResponseWriter, r *http.Request) {
	s.withConfig(w, r, func(ce *configEntry) {
		ce.deleted = true
		w.WriteHeader(http.StatusNoContent)
	})
}

// configSessions serves GET /v2/agents/configs/{id}/sessions, the same
// page shape as the session list.
func (s *Server) configSessions(w http.ResponseWriter, r *http.Request) {
	size, err := pageSize(r.URL.Query().Get("page_size"))
	if err != nil {
		s.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	var afterTime time.Time
	var afterID string
	if v := r.URL.Query().Get("page_token"); v != "" {
		if afterTime, afterID, err = parsePageToken(v); err != nil {
			s.fail(w, http.StatusBadRequest, "invalid page_token")
			return
		}
	}
	var out []Session
	found := false
	s.withConfig(w, r, func(ce *configEntry) {
		found = true
		s.settleLocked()
		for _, e := range s.sessions {
			if e.s.ConfigID == ce.c.ConfigID && e.s.Status != StatusDestroyed {
				out = append(out, e.s)
			}
		}
	})
	if found {
		s.writePage(w, out, size, afterTime, afterID)
	}
}

// --- admin ---

// adminRoutes adds the DigitalOcean-specific admin routes to the shared
// ones:
//
//	GET  /_emulator/state                      {sessions, configs}
//	POST /_emulator/seed                       Session JSON → 201 Session
//	POST /_emulator/sessions/{id}/event        record an event (Touch)
//	GET  /_emulator/sessions/{id}/endpoint     ingress URL (Endpoint)
func (s *Server) adminRoutes() http.Handler {
	a := s.AdminMux()
	a.Handle("GET "+emulator.AdminPrefix+"sessions/{id}/endpoint", "ingress URL (published if none; wants the DO token as Bearer)", func(w http.ResponseWriter, r *http.Request) {
		ep, err := s.Endpoint(r.PathValue("id"))
		if err != nil {
			emulator.AdminError(w, http.StatusNotFound, err)
			return
		}
		emulator.WriteJSON(w, http.StatusOK, ep)
	})
	a.Handle("GET "+emulator.AdminPrefix+"state", "every session and config", func(w http.ResponseWriter, r *http.Request) {
		sessions := s.Sessions()
		s.mu.Lock()
		configs := []Config{}
		for _, ce := range s.configs {
			configs = append(configs, ce.c)
		}
		s.mu.Unlock()
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"sessions": sessions, "configs": configs})
	})
	a.Handle("POST "+emulator.AdminPrefix+"seed", "add a session directly (Session JSON)", func(w http.ResponseWriter, r *http.Request) {
		var in Session
		if err := emulator.DecodeJSON(r, &in); err != nil {
			emulator.AdminError(w, http.StatusBadRequest, err)
			return
		}
		out, err := s.trySeed(in)
		if err != nil {
			emulator.AdminError(w, http.StatusBadRequest, err)
			return
		}
		emulator.WriteJSON(w, http.StatusCreated, out)
	})
	a.Handle("POST "+emulator.AdminPrefix+"sessions/{id}/event", "record an event (resets the idle clock)", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Touch(r.PathValue("id")); err != nil {
			status := http.StatusNotFound
			if errors.Is(err, ErrNotRunning) {
				status = http.StatusConflict
			}
			emulator.AdminError(w, status, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return a
}

func (s *Server) trySeed(in Session) (out Session, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return s.Seed(in), nil
}
