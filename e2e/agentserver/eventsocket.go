package main

import (
	"net/http"

	"github.com/gorilla/websocket"
)

// eventsSocket is GET /sockets/events/{conversation_id}: the
// conversation's events, live, after a snapshot of its state and, when
// asked, the stored ones again.
//
// Query parameters (validated before anything else; a bad one refuses
// the handshake with 403): resend_mode = all | since, after_timestamp (a
// datetime, used by since: events stamped at or after it), and the
// deprecated resend_all (a bool, "all" when resend_mode is absent).
func (s *Server) eventsSocket(w http.ResponseWriter, r *http.Request) {
	if notASocket(w, r) {
		return
	}
	q := r.URL.Query()
	id, valid := parseUUID(r.PathValue("id"))
	mode, hasMode := lastQuery(q, "resend_mode")
	if hasMode && mode != "all" && mode != "since" {
		valid = false
	}
	var since string
	if v, ok := lastQuery(q, "after_timestamp"); ok {
		t, aware, ok := pyDateTime(v)
		valid = valid && ok
		since = sinceBound(t, aware)
	}
	mode, ok := resendAll(q, mode, hasMode)
	valid = valid && ok
	if !valid {
		refuseHandshake(w)
		return
	}
	sk := s.acceptSocket(w, r)
	if sk == nil {
		return
	}
	defer s.sockets.remove(sk)
	defer sk.finish()

	c, ok := s.subscribeEvents(sk, id, mode, since)
	if !ok {
		return
	}
	defer c.events.unsubscribe(sk)
	go sk.writeLoop()
	sk.readFrames(func(mt int, data []byte) { s.eventsFrame(sk, c, mt, data) })
}

// subscribeEvents finds the conversation and subscribes sk to it, then
// queues the state snapshot and the events to resend, all under the
// store's lock: events appended later reach sk after them, once each.
// (Upstream sends what is published meanwhile as it comes, so there it
// may arrive among the resent events.)
func (s *Server) subscribeEvents(sk *socket, id uuid, mode, since string) (*conversation, bool) {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	c, ok := s.store.convs[id]
	if !ok {
		sk.closeWith(closeNotFound, "Conversation not found")
		return nil, false
	}
	if err := c.events.subscribe(sk); err != nil {
		sk.closeWith(websocket.CloseTryAgainLater, "Too many connections for this conversation")
		return nil, false
	}
	sk.sendEvent(s.stateSnapshot(c))
	if mode == "all" || mode == "since" && since != "" {
		evs, err := s.store.events(c)
		if err != nil {
			s.log.Warn("events not resent", "conversation", id.dashed(), "err", err)
		}
		for _, ev := range evs {
			if ts, _ := ev["timestamp"].(string); mode == "since" && ts < since {
				continue
			}
			sk.sendEvent(ev)
		}
	}
	return c, true
}

// sendEvent queues a conversation event as upstream dumps it
// (exclude_none).
func (sk *socket) sendEvent(ev map[string]any) {
	if frame, err := eventFrame(ev); err == nil {
		sk.deliver(frame)
	}
}

// eventsFrame handles one frame from a client: a redundant auth frame is
// ignored; anything else must be a Message, which is sent to the
// conversation as a user message (run=true). What fails comes back as a
// ServerErrorEvent to this socket only.
func (s *Server) eventsFrame(sk *socket, c *conversation, mt int, data []byte) {
	v, exc, text := decodeFrame(mt, data)
	if exc != "" {
		sk.sendEvent(s.serverError(exc, text))
		return
	}
	if isAuthControl(v) {
		return
	}
	msg, text := socketMessage(v)
	if text != "" {
		sk.sendEvent(s.serverError("ValidationError", text))
		return
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	switch {
	case c.closed:
		sk.sendEvent(s.serverError("ValueError", "inactive_service"))
	case msg.Role != "user":
		sk.sendEvent(s.serverError("AssertionError", "Only user messages are allowed to be sent to the agent."))
	default:
		if err := s.appendMessage(c, msg); err != nil {
			sk.sendEvent(s.serverError("OSError", err.Error()))
		}
	}
}

// serverError is a ServerErrorEvent, which is sent, never stored.
func (s *Server) serverError(code, text string) map[string]any {
	return map[string]any{
		"kind": "ServerErrorEvent", "id": newUUID().dashed(), "timestamp": eventTime(s.now()),
		"source": "environment", "code": code, "detail": text,
	}
}

// stateSnapshot is the ConversationStateUpdateEvent a new subscriber gets
// first: key "full_state" and the conversation's state as the emulator
// has it (upstream's has more fields, for features the emulator lacks).
// It is not stored and is not activity.
func (s *Server) stateSnapshot(c *conversation) map[string]any {
	agent, _, err := redactJSON(c.Agent)
	if err != nil {
		agent = c.Agent
	}
	tags := c.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	return map[string]any{
		"kind": "ConversationStateUpdateEvent", "id": newUUID().dashed(), "timestamp": eventTime(s.now()),
		"source": "environment", "key": "full_state",
		"value": map[string]any{
			"id": c.ID.dashed(), "agent": agent, "workspace": c.Workspace,
			"persistence_dir": s.store.convDir(c.ID), "max_iterations": c.MaxIterations,
			"stuck_detection": c.StuckDetection, "execution_status": c.Status, "tags": tags,
		},
	}
}
