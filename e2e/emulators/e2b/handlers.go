package e2b

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// validation answers the way the API's OpenAPI request validator does
// (utils.ErrorHandler: "validation error: …").
func (s *Server) validation(w http.ResponseWriter, msg string) {
	s.fail(w, http.StatusBadRequest, "validation error: "+msg)
}

// --- list ---

// parseStates reads ?state= (form style, explode=false: "running,paused";
// repeated values are accepted too). Nil means both.
func parseStates(q url.Values) ([]string, error) {
	var out []string
	for _, v := range q["state"] {
		for st := range strings.SplitSeq(v, ",") {
			st = strings.TrimSpace(st)
			if st != StateRunning && st != StatePaused {
				return nil, fmt.Errorf(`parameter "state" in query has an error: value %q is not one of the allowed values ["running","paused"]`, st)
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// parseMetadata reads ?metadata=, itself URL-encoded "k=v&k2=v2"
// (utils.ParseMetadata): every pair must match.
func parseMetadata(q url.Values) (map[string]string, error) {
	raw := q.Get("metadata")
	if raw == "" {
		return nil, nil
	}
	out := map[string]string{}
	for pair := range strings.SplitSeq(raw, "&") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return nil, errors.New("invalid key value pair in query")
		}
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return nil, errors.New("invalid escaping in query")
		}
		out[key] = val
	}
	return out, nil
}

func hasMetadata(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// token is the pagination cursor: base64url("{RFC3339Nano}__{id}"), the
// format of utils/pagination.go for the default descending order.
func token(sb Sandbox) string {
	return base64.URLEncoding.EncodeToString([]byte(sb.StartedAt.Format(time.RFC3339Nano) + "__" + sb.SandboxID))
}

func parseToken(tok string) (time.Time, string, error) {
	raw, err := base64.URLEncoding.DecodeString(tok)
	if err != nil {
		return time.Time{}, "", err
	}
	parts := strings.Split(string(raw), "__")
	if len(parts) != 2 {
		return time.Time{}, "", errors.New("invalid cursor format")
	}
	t, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return time.Time{}, "", err
	}
	return t.Truncate(time.Microsecond), parts[1], nil
}

// listV2 serves GET /v2/sandboxes: running and paused sandboxes (both when
// state is absent), newest first, limit 1–100 (default 100), the next
// page's token in X-Next-Token, and X-Total-Running when running ones were
// asked for.
func (s *Server) listV2(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	states, err := parseStates(q)
	if err != nil {
		s.validation(w, err.Error())
		return
	}
	if states == nil {
		states = []string{StateRunning, StatePaused}
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			s.validation(w, `parameter "limit" in query has an error: number must be an integer between 1 and 100`)
			return
		}
		limit = n
	}
	var cursorTime time.Time
	var cursorID string
	if v := q.Get("nextToken"); v != "" {
		cursorTime, cursorID, err = parseToken(v)
		if err != nil {
			s.fail(w, http.StatusBadRequest, "Invalid next token")
			return
		}
	}
	meta, err := parseMetadata(q)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "Error parsing metadata")
		return
	}

	s.mu.Lock()
	s.settleLocked()
	var items []Sandbox
	running := 0
	for _, sb := range s.boxes {
		if !slices.Contains(states, sb.State) || !hasMetadata(sb.Metadata, meta) {
			continue
		}
		if sb.State == StateRunning {
			running++
		}
		items = append(items, sb.clone())
	}
	s.mu.Unlock()

	slices.SortFunc(items, newestFirst)
	if cursorID != "" {
		items = slices.DeleteFunc(items, func(sb Sandbox) bool {
			// Keep only what sorts strictly after the cursor (older, or
			// same time and smaller id).
			if c := sb.StartedAt.Compare(cursorTime); c != 0 {
				return c > 0
			}
			return sb.SandboxID >= cursorID
		})
	}
	if len(items) > limit {
		w.Header().Set("X-Next-Token", token(items[limit-1]))
		items = items[:limit]
	}
	if slices.Contains(states, StateRunning) {
		w.Header().Set("X-Total-Running", strconv.Itoa(running))
	}
	if items == nil {
		items = []Sandbox{}
	}
	emulator.WriteJSON(w, http.StatusOK, items)
}

// listV1 serves the deprecated GET /sandboxes: running sandboxes only, no
// pagination.
func (s *Server) listV1(w http.ResponseWriter, r *http.Request) {
	meta, err := parseMetadata(r.URL.Query())
	if err != nil {
		s.fail(w, http.StatusBadRequest, "Error parsing metadata")
		return
	}
	s.mu.Lock()
	s.settleLocked()
	items := []Sandbox{}
	for _, sb := range s.boxes {
		if sb.State == StateRunning && hasMetadata(sb.Metadata, meta) {
			items = append(items, sb.clone())
		}
	}
	s.mu.Unlock()
	slices.SortFunc(items, newestFirst)
	emulator.WriteJSON(w, http.StatusOK, items)
}

// --- create ---

type newSandbox struct {
	TemplateID string            `json:"templateID"`
	Timeout    *int              `json:"timeout"`
	AutoPause  bool              `json:"autoPause"`
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars"`
	Secure     bool              `json:"secure"`
	AutoResume *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	Network *struct {
		AllowPublicTraffic *bool `json:"allowPublicTraffic"`
	} `json:"network"`
}

// timeoutFrom checks a timeout in seconds against the team maximum.
func (s *Server) timeoutFrom(w http.ResponseWriter, secs int) (time.Duration, bool) {
	if secs < 0 {
		s.validation(w, `property "timeout" has an error: number must be at least 0`)
		return 0, false
	}
	d := time.Duration(secs) * time.Second
	if d > s.opts.MaxTimeout {
		s.fail(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.opts.MaxTimeout/time.Hour)))
		return 0, false
	}
	return d, true
}

// create serves POST /sandboxes → 201 Sandbox. Creation is synchronous:
// the sandbox is running when the answer arrives.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req newSandbox
	if err := emulator.DecodeJSON(r, &req); err != nil {
		s.validation(w, "request body has an error: "+err.Error())
		return
	}
	if req.TemplateID == "" {
		s.validation(w, `request body has an error: doesn't match schema: property "templateID" is missing`)
		return
	}
	timeout := DefaultTimeout
	if req.Timeout != nil {
		d, ok := s.timeoutFrom(w, *req.Timeout)
		if !ok {
			return
		}
		timeout = d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	if s.concurrencyLocked(w) {
		return
	}
	now := s.Clock().Now()
	sb := &Sandbox{
		TemplateID: req.TemplateID,
		SandboxID:  newID(),
		StartedAt:  now,
		EndAt:      now.Add(timeout),
		Metadata:   maps.Clone(req.Metadata),
		State:      StateRunning,
		AutoPause:  req.AutoPause,
		AutoResume: req.AutoResume != nil && req.AutoResume.Enabled,
		Secure:     req.Secure,
		Private:    req.Network != nil && req.Network.AllowPublicTraffic != nil && !*req.Network.AllowPublicTraffic,
		EnvVars:    maps.Clone(req.EnvVars),
	}
	fillDefaults(sb)
	s.boxes[sb.SandboxID] = sb
	emulator.WriteJSON(w, http.StatusCreated, s.withDomain(sb.created()))
}

// --- single-sandbox routes ---

// withBox runs fn on the sandbox under the lock, answering 404 for unknown
// ones (and for killed ones, which the API forgets).
func (s *Server) withBox(w http.ResponseWriter, r *http.Request, fn func(sb *Sandbox)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	id := r.PathValue("sandboxID")
	sb, ok := s.boxes[id]
	if !ok {
		s.fail(w, http.StatusNotFound, notFoundMsg(id))
		return
	}
	fn(sb)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.withBox(w, r, func(sb *Sandbox) {
		emulator.WriteJSON(w, http.StatusOK, sb.detail())
	})
}

// kill serves DELETE /sandboxes/{id} → 204, running or paused.
func (s *Server) kill(w http.ResponseWriter, r *http.Request) {
	s.withBox(w, r, func(sb *Sandbox) {
		delete(s.boxes, sb.SandboxID)
		w.WriteHeader(http.StatusNoContent)
	})
}

// pause serves POST /sandboxes/{id}/pause (optional {memory}) → 204. A
// paused sandbox answers 409 as handlers/sandbox_pause.go does. Pause
// completes before the answer, so the transitional "cannot be paused while
// in '<state>' state" 409 never arises here.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Memory *bool `json:"memory"`
	}
	if err := emulator.DecodeJSON(r, &body); err != nil && !errors.Is(err, emulator.ErrEmptyBody) {
		s.validation(w, "request body has an error: "+err.Error())
		return
	}
	s.withBox(w, r, func(sb *Sandbox) {
		if sb.State == StatePaused {
			s.fail(w, http.StatusConflict, fmt.Sprintf("Error pausing sandbox - sandbox '%s' is already paused", sb.SandboxID))
			return
		}
		sb.State = StatePaused
		sb.EndAt = s.Clock().Now().UTC().Truncate(time.Microsecond)
		w.WriteHeader(http.StatusNoContent)
	})
}

// connect serves POST /sandboxes/{id}/connect {timeout}: 200 with the TTL
// only ever extended if it was running, 201 if it was paused and resumed
// (handlers/sandbox_connect.go).
func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Timeout *int `json:"timeout"`
	}
	if err := emulator.DecodeJSON(r, &body); err != nil {
		s.validation(w, "request body has an error: "+err.Error())
		return
	}
	if body.Timeout == nil {
		s.validation(w, `request body has an error: doesn't match schema: property "timeout" is missing`)
		return
	}
	timeout, ok := s.timeoutFrom(w, *body.Timeout)
	if !ok {
		return
	}
	s.withBox(w, r, func(sb *Sandbox) {
		now := s.Clock().Now()
		if sb.State == StateRunning {
			if end := now.Add(timeout); end.After(sb.EndAt) {
				sb.EndAt = end.UTC().Truncate(time.Microsecond)
			}
			emulator.WriteJSON(w, http.StatusOK, s.withDomain(sb.created()))
			return
		}
		if s.concurrencyLocked(w) {
			return
		}
		s.resumeLocked(sb, now, timeout)
		emulator.WriteJSON(w, http.StatusCreated, s.withDomain(sb.created()))
	})
}

func (s *Server) resumeLocked(sb *Sandbox, now time.Time, timeout time.Duration) {
	sb.State = StateRunning
	sb.StartedAt = now.UTC().Truncate(time.Microsecond)
	sb.EndAt = now.Add(timeout).UTC().Truncate(time.Microsecond)
}

// resume serves the deprecated POST /sandboxes/{id}/resume {timeout,
// autoPause} → 201, 409 if already running.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Timeout *int `json:"timeout"`
	}
	if err := emulator.DecodeJSON(r, &body); err != nil && !errors.Is(err, emulator.ErrEmptyBody) {
		s.validation(w, "request body has an error: "+err.Error())
		return
	}
	timeout := DefaultTimeout
	if body.Timeout != nil {
		d, ok := s.timeoutFrom(w, *body.Timeout)
		if !ok {
			return
		}
		timeout = d
	}
	s.withBox(w, r, func(sb *Sandbox) {
		if sb.State == StateRunning {
			s.fail(w, http.StatusConflict, fmt.Sprintf("Sandbox %s is already running", sb.SandboxID))
			return
		}
		if s.concurrencyLocked(w) {
			return
		}
		s.resumeLocked(sb, s.Clock().Now(), timeout)
		emulator.WriteJSON(w, http.StatusCreated, sb.created())
	})
}

// setTimeout serves POST /sandboxes/{id}/timeout {timeout} → 204: endAt
// becomes now+timeout, shorter or longer. Only running sandboxes are in
// the orchestrator, so a paused one is 404 (handlers/sandbox_timeout.go).
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Timeout *int `json:"timeout"`
	}
	if err := emulator.DecodeJSON(r, &body); err != nil || body.Timeout == nil {
		s.fail(w, http.StatusBadRequest, "Error when parsing request: timeout is required")
		return
	}
	secs := max(*body.Timeout, 0) // the handler treats a negative timeout as 0
	timeout, ok := s.timeoutFrom(w, secs)
	if !ok {
		return
	}
	s.withBox(w, r, func(sb *Sandbox) {
		if sb.State != StateRunning {
			s.fail(w, http.StatusNotFound, notFoundMsg(sb.SandboxID))
			return
		}
		sb.EndAt = s.Clock().Now().Add(timeout).UTC().Truncate(time.Microsecond)
		w.WriteHeader(http.StatusNoContent)
		s.settleLocked()
	})
}

// refresh serves POST /sandboxes/{id}/refreshes {duration ≤ 3600} → 204:
// extends the TTL to at least now+duration.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Duration *int `json:"duration"`
	}
	if err := emulator.DecodeJSON(r, &body); err != nil && !errors.Is(err, emulator.ErrEmptyBody) {
		s.validation(w, "request body has an error: "+err.Error())
		return
	}
	secs := 0
	if body.Duration != nil {
		secs = *body.Duration
	}
	if secs < 0 || secs > 3600 {
		s.validation(w, `property "duration" has an error: number must be between 0 and 3600`)
		return
	}
	s.withBox(w, r, func(sb *Sandbox) {
		if sb.State != StateRunning {
			s.fail(w, http.StatusNotFound, notFoundMsg(sb.SandboxID))
			return
		}
		if end := s.Clock().Now().Add(time.Duration(secs) * time.Second); end.After(sb.EndAt) {
			sb.EndAt = end.UTC().Truncate(time.Microsecond)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// --- admin ---

// adminRoutes adds the E2B-specific admin routes to the shared ones:
//
//	GET  /_emulator/state   every sandbox (SandboxDetail shape)
//	POST /_emulator/seed    Sandbox JSON plus optional autoPause → 201
//	GET  /_emulator/sandboxes/{id}/endpoint  URL and traffic token of ?port= (default 8000)
func (s *Server) adminRoutes() http.Handler {
	a := s.AdminMux()
	a.Handle("GET "+emulator.AdminPrefix+"sandboxes/{id}/endpoint", "URL and traffic token of ?port= (default 8000)", func(w http.ResponseWriter, r *http.Request) {
		port, err := emulator.PortParam(r)
		if err != nil {
			emulator.AdminError(w, http.StatusBadRequest, err)
			return
		}
		ep, err := s.Endpoint(r.PathValue("id"), port)
		if err != nil {
			emulator.AdminError(w, http.StatusNotFound, err)
			return
		}
		emulator.WriteJSON(w, http.StatusOK, ep)
	})
	a.Handle("GET "+emulator.AdminPrefix+"state", "every sandbox", func(w http.ResponseWriter, r *http.Request) {
		out := []Detail{}
		for _, sb := range s.Sandboxes() {
			out = append(out, sb.detail())
		}
		emulator.WriteJSON(w, http.StatusOK, out)
	})
	a.Handle("POST "+emulator.AdminPrefix+"seed", "add a sandbox directly (ListedSandbox JSON, plus autoPause)", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Sandbox
			AutoPause bool `json:"autoPause"`
		}
		if err := emulator.DecodeJSON(r, &body); err != nil {
			emulator.AdminError(w, http.StatusBadRequest, err)
			return
		}
		body.Sandbox.AutoPause = body.AutoPause
		sb, err := s.trySeed(body.Sandbox)
		if err != nil {
			emulator.AdminError(w, http.StatusBadRequest, err)
			return
		}
		emulator.WriteJSON(w, http.StatusCreated, sb.detail())
	})
	return a
}

func (s *Server) trySeed(in Sandbox) (sb Sandbox, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return s.Seed(in), nil
}
