package daytona

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// Error codes the newer API attaches (apps/api/src/exceptions).
const (
	codeStateChange = "SANDBOX_STATE_CHANGE_IN_PROGRESS"
	codeState       = "SANDBOX_STATE_ERROR"
)

func (s *Server) notFound(w http.ResponseWriter, r *http.Request, idOrName string) {
	s.fail(w, r, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", idOrName), "")
}

// inProgress answers an action on a box that is mid-transition. Older API
// versions answered 400 "State change in progress" (SandboxError); newer
// ones throw StateChangeInProgressError, a 409. The emulator follows the
// newer code.
func (s *Server) inProgress(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusConflict, "Sandbox state change in progress", codeStateChange)
}

// wrongState answers an action the box's state does not allow: 400 in
// every version read (SandboxError / SandboxStateError).
func (s *Server) wrongState(w http.ResponseWriter, r *http.Request, msg string) {
	s.fail(w, r, http.StatusBadRequest, msg, codeState)
}

func (s *Server) badRequest(w http.ResponseWriter, r *http.Request, msg string) {
	s.fail(w, r, http.StatusBadRequest, msg, "")
}

// --- list ---

var sortFields = []string{"name", "cpu", "memoryGib", "diskGib", "lastActivityAt", "createdAt"}

// cursor is the opaque nextCursor: a keyset position in one sort order.
type cursor struct {
	Sort  string `json:"s"`
	Order string `json:"o"`
	Key   string `json:"k"`
	ID    string `json:"i"`
}

// sortKey renders the sort field so that string order is the field's order.
func sortKey(sb Sandbox, field string) string {
	switch field {
	case "name":
		return sb.Name
	case "cpu":
		return fmt.Sprintf("%020.6f", sb.CPU)
	case "memoryGib":
		return fmt.Sprintf("%020.6f", sb.Memory)
	case "diskGib":
		return fmt.Sprintf("%020.6f", sb.Disk)
	case "lastActivityAt":
		return fmt.Sprintf("%020d", sb.LastActivityAt.UnixNano())
	default:
		return fmt.Sprintf("%020d", sb.CreatedAt.UnixNano())
	}
}

// list serves GET /sandbox: ListSandboxesResponse{items, nextCursor}.
// Default order is createdAt desc [the spec gives no default; newest first
// is the likely reading]. labels is a JSON object string, all pairs must
// match; states accepts repeated states / states[] and comma lists.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			s.badRequest(w, r, "limit must be an integer number")
			return
		case n < 1:
			s.badRequest(w, r, "limit must not be less than 1")
			return
		case n > 200:
			s.badRequest(w, r, "limit must not be greater than 200")
			return
		}
		limit = n
	}
	field := q.Get("sort")
	if field == "" {
		field = "createdAt"
	}
	if !slices.Contains(sortFields, field) {
		s.badRequest(w, r, "sort must be one of the following values: "+strings.Join(sortFields, ", "))
		return
	}
	order := q.Get("order")
	if order == "" {
		order = "desc"
	}
	if order != "asc" && order != "desc" {
		s.badRequest(w, r, "order must be one of the following values: asc, desc")
		return
	}
	var after *cursor
	if v := q.Get("cursor"); v != "" {
		raw, err := base64.RawURLEncoding.DecodeString(v)
		var c cursor
		if err == nil {
			err = json.Unmarshal(raw, &c)
		}
		if err != nil || c.ID == "" {
			s.badRequest(w, r, "Invalid cursor")
			return
		}
		if c.Sort != field || c.Order != order {
			s.badRequest(w, r, "Cursor does not match the requested sort order")
			return
		}
		after = &c
	}
	var labels map[string]string
	if v := q.Get("labels"); v != "" {
		// The controller JSON.parses this; the emulator answers malformed
		// input with 400 rather than the 500 a parse exception would give.
		if err := json.Unmarshal([]byte(v), &labels); err != nil {
			s.badRequest(w, r, "labels must be a JSON object of strings")
			return
		}
	}
	var states []string
	for _, v := range append(q["states"], q["states[]"]...) {
		for st := range strings.SplitSeq(v, ",") {
			if st = strings.TrimSpace(st); st == "" {
				continue
			}
			if !slices.Contains(allStates, st) {
				s.badRequest(w, r, "Invalid sandbox state: "+st)
				return
			}
			states = append(states, st)
		}
	}
	idPrefix, namePrefix := q.Get("id"), q.Get("name")

	s.mu.Lock()
	s.settleLocked()
	now := s.Clock().Now()
	var listed []Sandbox
	for _, b := range s.boxes {
		if sb, ok := s.listedLocked(b, now); ok {
			listed = append(listed, sb)
		}
	}
	for _, g := range s.ghosts {
		listed = append(listed, g.sb)
	}
	var items []Sandbox
	for _, sb := range listed {
		if len(states) > 0 && !slices.Contains(states, sb.State) {
			continue
		}
		if !strings.HasPrefix(sb.ID, idPrefix) || !strings.HasPrefix(sb.Name, namePrefix) {
			continue
		}
		if !hasLabels(sb.Labels, labels) {
			continue
		}
		items = append(items, sb.listItem())
	}
	s.mu.Unlock()

	cmp := func(a, b Sandbox) int {
		c := strings.Compare(sortKey(a, field), sortKey(b, field))
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if order == "desc" {
			c = -c
		}
		return c
	}
	slices.SortFunc(items, cmp)
	if after != nil {
		items = slices.DeleteFunc(items, func(sb Sandbox) bool {
			c := strings.Compare(sortKey(sb, field), after.Key)
			if c == 0 {
				c = strings.Compare(sb.ID, after.ID)
			}
			if order == "desc" {
				c = -c
			}
			return c <= 0
		})
	}
	var next *string
	if len(items) > limit {
		items = items[:limit]
		last := items[limit-1]
		raw, _ := json.Marshal(cursor{Sort: field, Order: order, Key: sortKey(last, field), ID: last.ID})
		c := base64.RawURLEncoding.EncodeToString(raw)
		next = &c
	}
	if items == nil {
		items = []Sandbox{}
	}
	emulator.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": next})
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// --- create ---

// createSandbox is the CreateSandbox body; pointers tell absent from zero.
type createSandbox struct {
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	Class               string            `json:"class"`
	Target              string            `json:"target"`
	CPU                 *float64          `json:"cpu"`
	GPU                 *float64          `json:"gpu"`
	Memory              *float64          `json:"memory"`
	Disk                *float64          `json:"disk"`
	AutoStopInterval    *int              `json:"autoStopInterval"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval"`
	BuildInfo           json.RawMessage   `json:"buildInfo"`
}

// create serves POST /sandbox → 200 Sandbox. The real controller waits up
// to 30 s for "started" before answering; the emulator answers at once with
// the state as of now ("creating" unless Delays.Create is zero), so callers
// must cope with both, as they must when the real wait times out.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req createSandbox
	if err := emulator.DecodeJSON(r, &req); err != nil && !errors.Is(err, emulator.ErrEmptyBody) {
		s.badRequest(w, r, "Invalid request body: "+err.Error())
		return
	}
	hasBuild := len(req.BuildInfo) > 0 && string(req.BuildInfo) != "null"
	if hasBuild && req.Snapshot != "" {
		s.badRequest(w, r, "Cannot specify a snapshot when using a build info entry")
		return
	}
	if !hasBuild && (req.CPU != nil || req.GPU != nil || req.Memory != nil || req.Disk != nil) {
		s.badRequest(w, r, "Cannot specify Sandbox resources when using a snapshot")
		return
	}
	if v := req.AutoStopInterval; v != nil && *v < 0 {
		s.badRequest(w, r, "autoStopInterval must not be less than 0")
		return
	}
	if v := req.AutoArchiveInterval; v != nil && *v < 0 {
		s.badRequest(w, r, "autoArchiveInterval must not be less than 0")
		return
	}
	switch req.Class {
	case "", "container", "linux-vm", "android", "windows":
	default:
		s.badRequest(w, r, "class must be one of the following values: container, linux-vm, android, windows")
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	now := s.Clock().Now()
	sb := s.newSandbox(now)
	if req.Name != "" {
		if s.lookupLocked(req.Name) != nil {
			s.fail(w, r, http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", req.Name), "")
			return
		}
		sb.Name = req.Name
	}
	if req.Snapshot != "" {
		sb.Snapshot = req.Snapshot
	}
	if req.User != "" {
		sb.User = req.User
	}
	if req.Target != "" {
		sb.Target = req.Target
	}
	if req.Class != "" {
		sb.SandboxClass = req.Class
	}
	if req.Labels != nil {
		sb.Labels = maps.Clone(req.Labels)
	}
	sb.Env = maps.Clone(req.Env)
	sb.Public, sb.NetworkBlockAll = req.Public, req.NetworkBlockAll
	for _, f := range []struct {
		src *float64
		dst *float64
	}{{req.CPU, &sb.CPU}, {req.GPU, &sb.GPU}, {req.Memory, &sb.Memory}, {req.Disk, &sb.Disk}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	if req.AutoStopInterval != nil {
		sb.AutoStopInterval = *req.AutoStopInterval
	}
	if req.AutoArchiveInterval != nil {
		sb.AutoArchiveInterval = *req.AutoArchiveInterval
	}
	if req.AutoDeleteInterval != nil {
		sb.AutoDeleteInterval = *req.AutoDeleteInterval
	}
	b := &box{sb: sb, listedFrom: now.Add(s.opts.ListLag)}
	s.begin(b, now, StateCreating, s.delays.Create)
	s.boxes[sb.ID] = b
	s.advance(b, now)
	emulator.WriteJSON(w, http.StatusOK, b.sb.clone())
}

// --- single-sandbox routes ---

// withBox runs fn on the named live box under the lock, answering 404 for
// unknown ones.
func (s *Server) withBox(w http.ResponseWriter, r *http.Request, fn func(b *box)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	idOrName := r.PathValue("idOrName")
	b := s.lookupLocked(idOrName)
	if b == nil {
		s.notFound(w, r, idOrName)
		return
	}
	fn(b)
	if b.sb.State == StateDestroyed {
		s.removeLocked(b)
	}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.withBox(w, r, func(b *box) {
		emulator.WriteJSON(w, http.StatusOK, b.sb.clone())
	})
}

// delete serves DELETE /sandbox/{idOrName} → 200 Sandbox with desiredState
// destroyed; the box is gone (404) once destroying finishes.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	s.withBox(w, r, func(b *box) {
		if !b.until.IsZero() {
			s.inProgress(w, r)
			return
		}
		now := s.Clock().Now()
		s.begin(b, now, StateDestroying, s.delays.Destroy)
		out := b.sb.clone()
		s.advance(b, now)
		emulator.WriteJSON(w, http.StatusOK, out)
	})
}

// start serves POST /sandbox/{idOrName}/start: "Starts a stopped or
// archived sandbox, or resumes a paused sandbox". Starting a started box
// returns it unchanged, as sandbox.service.ts start() does.
func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	s.withBox(w, r, func(b *box) {
		now := s.Clock().Now()
		switch {
		case b.sb.State == StateStarted:
		case !b.until.IsZero():
			s.inProgress(w, r)
			return
		case b.sb.State == StateStopped:
			b.previewToken = "" // start() sets a new authToken
			s.begin(b, now, StateStarting, s.delays.Start)
		case b.sb.State == StateArchived:
			b.previewToken = ""
			s.begin(b, now, StateRestoring, s.delays.Restore)
		case b.sb.State == StatePaused:
			s.begin(b, now, StateResuming, s.delays.Resume)
		default:
			s.wrongState(w, r, "Sandbox is not in valid state")
			return
		}
		s.advance(b, now)
		emulator.WriteJSON(w, http.StatusOK, b.sb.clone())
	})
}

// stop serves POST /sandbox/{idOrName}/stop[?force=true] → 200, no body.
// Allowed from started or paused (reference §1, sandbox.service.ts stop()).
func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	s.withBox(w, r, func(b *box) {
		if !b.until.IsZero() {
			s.inProgress(w, r)
			return
		}
		if b.sb.State != StateStarted && b.sb.State != StatePaused {
			s.wrongState(w, r, "Sandbox is not started")
			return
		}
		now := s.Clock().Now()
		s.beginStop(b, now)
		s.advance(b, now)
		w.WriteHeader(http.StatusOK)
	})
}

// archive serves POST /sandbox/{idOrName}/archive: only a stopped box.
func (s *Server) archive(w http.ResponseWriter, r *http.Request) {
	s.withBox(w, r, func(b *box) {
		if !b.until.IsZero() {
			s.inProgress(w, r)
			return
		}
		if b.sb.State != StateStopped {
			s.wrongState(w, r, "Sandbox is not stopped")
			return
		}
		now := s.Clock().Now()
		s.begin(b, now, StateArchiving, s.delays.Archive)
		s.advance(b, now)
		w.WriteHeader(http.StatusOK)
	})
}

// pause serves POST /sandbox/{idOrName}/pause: memory-keeping pause, only
// for linux-vm and windows classes (422 otherwise), only from started.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	s.withBox(w, r, func(b *box) {
		if c := b.sb.SandboxClass; c != "linux-vm" && c != "windows" {
			s.fail(w, r, http.StatusUnprocessableEntity, "Pausing is not supported for this sandbox", "")
			return
		}
		if !b.until.IsZero() {
			s.inProgress(w, r)
			return
		}
		if b.sb.State != StateStarted {
			s.wrongState(w, r, "Sandbox is not started")
			return
		}
		now := s.Clock().Now()
		s.begin(b, now, StatePausing, s.delays.Pause)
		s.advance(b, now)
		w.WriteHeader(http.StatusOK)
	})
}

// lastActivity serves POST /sandbox/{id}/last-activity → 201: an
// orchestrator's keep-alive that resets the auto-stop timer.
func (s *Server) lastActivity(w http.ResponseWriter, r *http.Request) {
	s.withBox(w, r, func(b *box) {
		b.sb.LastActivityAt = s.Clock().Now()
		w.WriteHeader(http.StatusCreated)
	})
}

// setInterval serves POST /sandbox/{idOrName}/{autostop|autoarchive|autodelete}/{interval}.
func (s *Server) setInterval(which string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("interval"))
		if err != nil {
			s.badRequest(w, r, "Validation failed (numeric string is expected)")
			return
		}
		if n < 0 && which != "autodelete" {
			s.badRequest(w, r, "Interval must not be negative")
			return
		}
		s.withBox(w, r, func(b *box) {
			switch which {
			case "autostop":
				b.sb.AutoStopInterval = n
			case "autoarchive":
				b.sb.AutoArchiveInterval = n
			case "autodelete":
				b.sb.AutoDeleteInterval = n
			}
			b.sb.UpdatedAt = s.Clock().Now()
			s.advance(b, s.Clock().Now())
			w.WriteHeader(http.StatusOK)
		})
	}
}

// replaceLabels serves PUT /sandbox/{idOrName}/labels {labels} → {labels}.
func (s *Server) replaceLabels(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Labels map[string]string `json:"labels"`
	}
	if err := emulator.DecodeJSON(r, &req); err != nil {
		s.badRequest(w, r, "Invalid request body: "+err.Error())
		return
	}
	if req.Labels == nil {
		s.badRequest(w, r, "labels must be an object")
		return
	}
	s.withBox(w, r, func(b *box) {
		b.sb.Labels = maps.Clone(req.Labels)
		b.sb.UpdatedAt = s.Clock().Now()
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"labels": b.sb.Labels})
	})
}
