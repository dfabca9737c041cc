package uibridge

import (
	"net/http"

	"github.com/canvasapp/companion/core"
)

// restoreBody is POST /v1/exports/{id}/restore's body; both fields are
// optional, and an empty body is fine.
type restoreBody struct {
	Name      string `json:"name"`
	AccountID string `json:"account_id"`
}

// restoreExport starts a restore of a verified export as a new workspace
// and answers 202 with it (state creating), like a create.
func (s *Server) restoreExport(w http.ResponseWriter, r *http.Request) {
	var body restoreBody
	if !s.decodeBody(w, r, &body, true) {
		return
	}
	ws, err := s.svc.RestoreExport(r.Context(), owner(r), r.PathValue("id"), core.RestoreRequest{Name: body.Name, AccountID: body.AccountID})
	if err == nil {
		w.Header().Set("Location", "/v1/workspaces/"+ws.ID)
	}
	s.answerWorkspace(w, r, http.StatusAccepted, ws, err)
}
