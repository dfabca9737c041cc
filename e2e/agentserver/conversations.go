package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// conversationInfo is the wire form of a conversation (ConversationInfo
// upstream, with the fields companion and Canvas read plus a few more).
type conversationInfo struct {
	ID              string            `json:"id"`
	Title           *string           `json:"title"`
	Tags            map[string]string `json:"tags"`
	CreatedAt       string            `json:"created_at"`
	UpdatedAt       string            `json:"updated_at"`
	ExecutionStatus string            `json:"execution_status"`
	Agent           json.RawMessage   `json:"agent"`
	Workspace       json.RawMessage   `json:"workspace"`
	PersistenceDir  string            `json:"persistence_dir"`
	MaxIterations   int               `json:"max_iterations"`
	StuckDetection  bool              `json:"stuck_detection"`
	Metrics         any               `json:"metrics"`
}

func (s *Server) info(c *conversation) conversationInfo {
	// Secrets are masked in responses, as pydantic's SecretStr does.
	agent, _, err := redactJSON(c.Agent)
	if err != nil {
		agent = c.Agent
	}
	tags := c.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	return conversationInfo{
		ID: c.ID.dashed(), Title: c.Title, Tags: tags, CreatedAt: pyTime(c.CreatedAt),
		UpdatedAt: pyTime(c.UpdatedAt), ExecutionStatus: c.Status, Agent: agent,
		Workspace: c.Workspace, PersistenceDir: s.store.convDir(c.ID),
		MaxIterations: c.MaxIterations, StuckDetection: c.StuckDetection,
	}
}

// pathID parses the {id} path segment, answering 422 when it is not a UUID.
func pathID(w http.ResponseWriter, r *http.Request, name string) (uuid, bool) {
	raw := r.PathValue("id")
	id, ok := parseUUID(raw)
	if !ok {
		writeJSON(w, http.StatusUnprocessableEntity, validation("uuid_parsing", []any{"path", name},
			"Input should be a valid UUID", raw))
	}
	return id, ok
}

type messageRequest struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Run     bool            `json:"run"`
}

func (m *messageRequest) validate(loc ...any) map[string]any {
	if m.Role == "" {
		m.Role = "user"
	}
	switch m.Role {
	case "user", "system", "assistant", "tool":
	default:
		return validation("literal_error", append(loc, "role"), "Input should be 'user', 'system', 'assistant' or 'tool'", m.Role)
	}
	if len(m.Content) == 0 || string(m.Content) == "null" {
		m.Content = json.RawMessage("[]")
	}
	if bytes.TrimSpace(m.Content)[0] != '[' {
		return validation("list_type", append(loc, "content"), "Input should be a valid list", nil)
	}
	return nil
}

type startRequest struct {
	ConversationID *string          `json:"conversation_id"`
	Agent          json.RawMessage  `json:"agent"`
	Workspace      json.RawMessage  `json:"workspace"`
	Title          *string          `json:"title"`
	Tags           json.RawMessage  `json:"tags"`
	InitialMessage *messageRequest  `json:"initial_message"`
	MaxIterations  *int             `json:"max_iterations"`
	StuckDetection *bool            `json:"stuck_detection"`
	Secrets        *json.RawMessage `json:"secrets"`
	Autotitle      *bool            `json:"autotitle"`
}

// startConversation is POST /api/conversations: 201 with a new
// conversation, or 200 with the existing one when conversation_id names
// one. Starting publishes the agent's system prompt (and the initial
// message), which are events and so reset the idle clock.
func (s *Server) startConversation(w http.ResponseWriter, r *http.Request) {
	var req startRequest
	if !readBody(w, r, &req) {
		return
	}
	id := newUUID()
	if req.ConversationID != nil {
		var ok bool
		if id, ok = parseUUID(*req.ConversationID); !ok {
			writeJSON(w, http.StatusUnprocessableEntity, validation("uuid_parsing", []any{"body", "conversation_id"},
				"Input should be a valid UUID", *req.ConversationID))
			return
		}
	}
	tags := map[string]string{}
	if len(req.Tags) > 0 && string(req.Tags) != "null" {
		if err := json.Unmarshal(req.Tags, &tags); err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, validation("dict_type", []any{"body", "tags"},
				"Input should be a valid dictionary of strings", nil))
			return
		}
	}
	if req.InitialMessage != nil {
		if v := req.InitialMessage.validate("body", "initial_message"); v != nil {
			writeJSON(w, http.StatusUnprocessableEntity, v)
			return
		}
	}
	if !isObject(req.Agent) {
		// Upstream requires a full Agent; the emulator runs none, so any
		// object will do and a missing one gets a placeholder.
		req.Agent = json.RawMessage(`{"kind":"Agent","llm":{"model":"emulator","usage_id":"agent"},"tools":[]}`)
	}
	if !isObject(req.Workspace) {
		req.Workspace = json.RawMessage(`{"kind":"LocalWorkspace","working_dir":"workspace/project"}`)
	}

	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	if c, ok := s.store.convs[id]; ok {
		writeJSON(w, http.StatusOK, s.info(c))
		return
	}
	now := s.touch()
	c := &conversation{
		ID: id, Title: req.Title, Tags: tags, CreatedAt: now, UpdatedAt: now, Status: "idle",
		Agent: req.Agent, Workspace: req.Workspace, MaxIterations: 500, StuckDetection: true,
		Secrets: json.RawMessage("{}"), Autotitle: req.Autotitle == nil || *req.Autotitle,
	}
	if req.MaxIterations != nil {
		c.MaxIterations = *req.MaxIterations
	}
	if req.StuckDetection != nil {
		c.StuckDetection = *req.StuckDetection
	}
	if req.Secrets != nil && isObject(*req.Secrets) {
		c.Secrets = *req.Secrets
	}
	c.events = newPubSub(c.internalSubscribers())
	err := s.store.appendEvent(c, map[string]any{
		"kind": "SystemPromptEvent", "timestamp": eventTime(now), "source": "agent",
		"system_prompt": map[string]string{"type": "text", "text": "You are an emulated OpenHands agent."},
		"tools":         []any{},
	})
	if err == nil && req.InitialMessage != nil {
		err = s.store.appendEvent(c, messageEvent(req.InitialMessage, eventTime(now)))
	}
	if err == nil {
		err = s.store.save(c)
	}
	if err != nil {
		s.store.remove(id)
		internalError(w, err)
		return
	}
	s.store.convs[id] = c
	s.log.Info("conversation started", "id", id.dashed())
	writeJSON(w, http.StatusCreated, s.info(c))
}

func messageEvent(m *messageRequest, ts string) map[string]any {
	source := "user"
	if m.Role == "assistant" {
		source = "agent"
	}
	return map[string]any{
		"kind": "MessageEvent", "timestamp": ts, "source": source,
		"llm_message":       map[string]any{"role": m.Role, "content": m.Content},
		"activated_skills":  []string{},
		"extended_content":  []any{},
		"sender":            nil,
		"critic_result":     nil,
		"llm_response_id":   nil,
		"reasoning_content": nil,
	}
}

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// sendMessage is POST /api/conversations/{id}/events: a message event,
// which is activity.
func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "conversation_id")
	if !ok {
		return
	}
	var req messageRequest
	if !readBody(w, r, &req) {
		return
	}
	if v := req.validate("body"); v != nil {
		writeJSON(w, http.StatusUnprocessableEntity, v)
		return
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	c, ok := s.store.convs[id]
	if !ok {
		writeJSON(w, http.StatusNotFound, detail("Not Found"))
		return
	}
	if err := s.appendMessage(c, &req); err != nil {
		internalError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}

// appendMessage stores a message event and publishes it; an event is
// activity (the idle clock and updated_at move). The caller holds
// s.store.mu.
func (s *Server) appendMessage(c *conversation, m *messageRequest) error {
	now := s.touch()
	if err := s.store.appendEvent(c, messageEvent(m, eventTime(now))); err != nil {
		return err
	}
	c.UpdatedAt = now
	return s.store.save(c)
}

var sortOrders = map[string]bool{"CREATED_AT": true, "UPDATED_AT": true, "CREATED_AT_DESC": true, "UPDATED_AT_DESC": true}

// statusParam reads the optional status filter; ok is false after a 422.
func statusParam(w http.ResponseWriter, r *http.Request) (status string, ok bool) {
	status = r.URL.Query().Get("status")
	if status != "" && !executionStatuses[status] {
		writeJSON(w, http.StatusUnprocessableEntity, validation("enum", []any{"query", "status"},
			"Input should be a valid conversation execution status", status))
		return "", false
	}
	return status, true
}

// search is GET /api/conversations/search. Pages are cut as upstream does:
// next_page_id is the 32-hex id of the first item of the next page, and a
// page starts at page_id (from the beginning when it matches nothing).
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, validation("int_parsing", []any{"query", "limit"},
				"Input should be a valid integer, unable to parse string as an integer", v))
			return
		}
		if n <= 0 || n > 100 {
			writeJSON(w, http.StatusUnprocessableEntity, validation("less_than_equal", []any{"query", "limit"},
				"Input should be greater than 0 and less than or equal to 100", v))
			return
		}
		limit = n
	}
	status, ok := statusParam(w, r)
	if !ok {
		return
	}
	order := q.Get("sort_order")
	if order == "" {
		order = "CREATED_AT_DESC"
	}
	if !sortOrders[order] {
		writeJSON(w, http.StatusUnprocessableEntity, validation("enum", []any{"query", "sort_order"},
			"Input should be 'CREATED_AT', 'UPDATED_AT', 'CREATED_AT_DESC' or 'UPDATED_AT_DESC'", order))
		return
	}
	pageID := q.Get("page_id")

	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	var all []*conversation
	for _, c := range s.store.convs {
		if status == "" || c.Status == status {
			all = append(all, c)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		ta, tb := a.CreatedAt, b.CreatedAt
		if strings.HasPrefix(order, "UPDATED_AT") {
			ta, tb = a.UpdatedAt, b.UpdatedAt
		}
		if !ta.Equal(tb) {
			if strings.HasSuffix(order, "_DESC") {
				return ta.After(tb)
			}
			return ta.Before(tb)
		}
		return a.ID.hex() < b.ID.hex() // map order is random; keep pages stable
	})
	start := 0
	if pageID != "" {
		for i, c := range all {
			if c.ID.hex() == pageID {
				start = i
				break
			}
		}
	}
	items := []conversationInfo{}
	var next *string
	for i := start; i < len(all); i++ {
		if len(items) >= limit {
			h := all[i].ID.hex()
			next = &h
			break
		}
		items = append(items, s.info(all[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_page_id": next})
}

// count is GET /api/conversations/count: a bare integer.
func (s *Server) count(w http.ResponseWriter, r *http.Request) {
	status, ok := statusParam(w, r)
	if !ok {
		return
	}
	s.store.mu.Lock()
	n := 0
	for _, c := range s.store.convs {
		if status == "" || c.Status == status {
			n++
		}
	}
	s.store.mu.Unlock()
	writeJSON(w, http.StatusOK, n)
}

func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "conversation_id")
	if !ok {
		return
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	c, ok := s.store.convs[id]
	if !ok {
		writeJSON(w, http.StatusNotFound, detail("Not Found"))
		return
	}
	writeJSON(w, http.StatusOK, s.info(c))
}

// batchGet is GET /api/conversations?ids=…: a list aligned with ids, null
// for unknown ones.
func (s *Server) batchGet(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query()["ids"]
	if len(raw) == 0 {
		writeJSON(w, http.StatusUnprocessableEntity, validation("missing", []any{"query", "ids"}, "Field required", nil))
		return
	}
	ids := make([]uuid, len(raw))
	for i, v := range raw {
		id, ok := parseUUID(v)
		if !ok {
			writeJSON(w, http.StatusUnprocessableEntity, validation("uuid_parsing", []any{"query", "ids", i},
				"Input should be a valid UUID", v))
			return
		}
		ids[i] = id
	}
	if len(ids) >= 100 {
		// Upstream asserts len(ids) < 100, which FastAPI turns into a 500.
		writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": "Internal Server Error", "exception": "too many ids"})
		return
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	out := make([]*conversationInfo, len(ids))
	for i, id := range ids {
		if c, ok := s.store.convs[id]; ok {
			info := s.info(c)
			out[i] = &info
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// updateConversation is PATCH /api/conversations/{id} with {title, tags?}.
// It is not an event, so not activity.
func (s *Server) updateConversation(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "conversation_id")
	if !ok {
		return
	}
	var req struct {
		Title *string            `json:"title"`
		Tags  *map[string]string `json:"tags"`
	}
	if !readBody(w, r, &req) {
		return
	}
	if req.Title == nil && req.Tags == nil {
		writeJSON(w, http.StatusUnprocessableEntity, validation("missing", []any{"body", "title"}, "Field required", nil))
		return
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	c, ok := s.store.convs[id]
	if !ok {
		writeJSON(w, http.StatusOK, map[string]bool{"success": false})
		return
	}
	if req.Title != nil {
		t := strings.TrimSpace(*req.Title)
		c.Title = &t
	}
	if req.Tags != nil {
		c.Tags = *req.Tags
	}
	c.UpdatedAt = s.now()
	if err := s.store.save(c); err != nil {
		internalError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}

// pauseConversation sets execution_status to paused; 400 for an unknown id.
func (s *Server) pauseConversation(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "conversation_id")
	if !ok {
		return
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	c, ok := s.store.convs[id]
	if !ok {
		writeJSON(w, http.StatusBadRequest, detail("Bad Request"))
		return
	}
	c.Status = "paused"
	if err := s.store.save(c); err != nil {
		internalError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}

// deleteConversation removes the conversation and its directory; 400 for an
// unknown id, as upstream.
func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "conversation_id")
	if !ok {
		return
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	if _, ok := s.store.convs[id]; !ok {
		writeJSON(w, http.StatusBadRequest, detail("Bad Request"))
		return
	}
	if err := s.store.remove(id); err != nil {
		s.log.Warn("could not remove conversation directory", "id", id.dashed(), "err", err)
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}
