package main

import (
	"errors"
	"net/http"

	"github.com/gorilla/websocket"
)

// bashEventsSocket is GET /sockets/bash-events: every bash event
// (BashCommand, BashOutput) as it is recorded, after the stored ones when
// resend_mode=all (or the deprecated resend_all). resend_mode takes no
// other value here; a bad parameter refuses the handshake with 403.
func (s *Server) bashEventsSocket(w http.ResponseWriter, r *http.Request) {
	if notASocket(w, r) {
		return
	}
	q := r.URL.Query()
	mode, hasMode := lastQuery(q, "resend_mode")
	valid := !hasMode || mode == "all"
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

	switch err := s.bash.subscribe(sk, mode == "all"); {
	case errors.Is(err, errTooManySubscribers):
		sk.closeWith(websocket.CloseTryAgainLater, "Too many bash event connections")
		return
	case err != nil:
		s.log.Warn("bash events not resent", "err", err)
	}
	defer s.bash.subs.unsubscribe(sk)
	go sk.writeLoop()
	sk.readFrames(func(mt int, data []byte) { s.bashFrame(sk, mt, data) })
}

// bashFrame handles one frame from a client: a redundant auth frame is
// ignored; anything else must be an ExecuteBashRequest, which starts the
// command in the background (its events come back on every bash socket).
// Unlike the HTTP routes this does not move the idle clock. What fails
// comes back as a BashError to this socket only.
func (s *Server) bashFrame(sk *socket, mt int, data []byte) {
	v, exc, text := decodeFrame(mt, data)
	if exc == "" && isAuthControl(v) {
		return
	}
	if exc == "" {
		var req bashRequest
		if req, text = socketBashRequest(v); text == "" {
			s.startBashCommand(req)
			return
		}
		exc = "ValidationError"
	}
	frame, err := compactJSON(map[string]any{
		"kind": "BashError", "id": newUUID().dashed(), "timestamp": pyTime(s.now()), "code": exc, "detail": text,
	})
	if err == nil {
		sk.deliver(frame)
	}
}
