package uibridge

import (
	"net/http"

	"github.com/canvasapp/companion/core"
)

// restoreBody is POST /v1/exports/{id}/restore's body; every field is
// optional, and an empty body is fine.
type restoreBody struct {
	Name      string `json:"name"`
	AccountID string `json:"account_id"`
	Method    string `json:"method"`
}

// RestorePreview is GET /v1/exports/{id}/restore-preview's answer.
type RestorePreview struct {
	ExportID  string `json:"export_id"`
	AccountID string `json:"account_id"`
	Provider  string `json:"provider"`
	// Method is "snapshot" or "files".
	Method string `json:"method"`
	// Dest is where the files go in the new box ("files" only).
	Dest       *string  `json:"dest"`
	Files      int64    `json:"files"`
	Bytes      int64    `json:"bytes"`
	BringsBack []string `json:"brings_back"`
	Cannot     []string `json:"cannot"`
}

// previewRestore says how a restore would go, making nothing. The query
// takes the restore body's account_id and method.
func (s *Server) previewRestore(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pv, err := s.svc.PreviewRestore(r.Context(), owner(r), r.PathValue("id"),
		core.RestoreRequest{AccountID: q.Get("account_id"), Method: q.Get("method")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"restore": RestorePreview{ExportID: pv.ExportID, AccountID: pv.AccountID,
		Provider: pv.Provider, Method: pv.Method, Dest: strPtr(pv.Dest), Files: pv.Files, Bytes: pv.Bytes,
		BringsBack: pv.BringsBack, Cannot: pv.Cannot}})
}

// restoreExport starts a restore of a verified export as a new workspace
// and answers 202 with it (state creating), like a create.
func (s *Server) restoreExport(w http.ResponseWriter, r *http.Request) {
	var body restoreBody
	if !s.decodeBody(w, r, &body, true) {
		return
	}
	ws, err := s.svc.RestoreExport(r.Context(), owner(r), r.PathValue("id"), core.RestoreRequest{Name: body.Name, AccountID: body.AccountID, Method: body.Method})
	if err == nil {
		w.Header().Set("Location", "/v1/workspaces/"+ws.ID)
	}
	s.answerWorkspace(w, r, http.StatusAccepted, ws, err)
}
