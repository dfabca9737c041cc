package uibridge

import (
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/canvasapp/companion/core"
)

// ExportFile is one downloadable file of an export.
type ExportFile struct {
	Name           string  `json:"name"`
	Kind           string  `json:"kind"`
	ConversationID *string `json:"conversation_id"`
	Format         *string `json:"format"`
	Bytes          int64   `json:"bytes"`
	SHA256         string  `json:"sha256"`
	// URL is where to download it (GET, with the same auth).
	URL string `json:"url"`
}

// Export is one export record as front ends see it. The directory on disk
// is not shown: in serve mode it is the server's.
type Export struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	// WorkspaceName, Provider and AccountID say what it was an export of
	// (as the workspace was when it began; null for older exports).
	WorkspaceName *string      `json:"workspace_name"`
	Provider      *string      `json:"provider"`
	AccountID     *string      `json:"account_id"`
	CreatedAt     time.Time    `json:"created_at"`
	UpdatedAt     time.Time    `json:"updated_at"`
	State         string       `json:"state"`
	Verified      bool         `json:"verified"`
	Bytes         int64        `json:"bytes"`
	ArchiveSHA256 *string      `json:"archive_sha256"`
	Error         *string      `json:"error"`
	Files         []ExportFile `json:"files"`
	// Restorable says POST /v1/exports/{id}/restore can bring it back
	// (into which account: GET /v1/exports/{id}/restore-preview).
	Restorable bool `json:"restorable"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func toWireExport(e core.ExportRecord) Export {
	out := Export{ID: e.ID, WorkspaceID: e.WorkspaceID, WorkspaceName: strPtr(e.WorkspaceName), Provider: strPtr(e.Provider),
		AccountID: strPtr(e.AccountID), CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt, State: e.State,
		Verified: e.Verified, Bytes: e.Bytes, ArchiveSHA256: strPtr(e.ArchiveSHA256), Error: strPtr(e.Error),
		Files: make([]ExportFile, 0, len(e.Files)), Restorable: e.Verified && e.Restorable()}
	for _, f := range e.Files {
		out.Files = append(out.Files, ExportFile{Name: f.Name, Kind: f.Kind, ConversationID: strPtr(f.ConversationID),
			Format: strPtr(f.Format), Bytes: f.Bytes, SHA256: f.SHA256,
			URL: "/v1/exports/" + url.PathEscape(e.ID) + "/files/" + url.PathEscape(f.Name)})
	}
	return out
}

// boolParam reads an optional true/false query parameter.
func boolParam(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, core.Errorf(core.KindInvalid, "%s must be true or false, not %q", name, v)
	}
	return b, nil
}

func (s *Server) startExport(w http.ResponseWriter, r *http.Request) {
	if !s.decodeBody(w, r, &emptyBody{}, true) {
		return
	}
	q := r.URL.Query()
	var o core.ExportOptions
	var err error
	if o.Wake, err = boolParam(q, "wake"); err == nil {
		o.GitDelta, err = boolParam(q, "git_delta")
	}
	if err == nil {
		o.PauseAgain, err = boolParam(q, "pause_again")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	e, err := s.svc.StartExport(r.Context(), owner(r), r.PathValue("id"), o)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/exports/"+e.ID)
	writeJSON(w, http.StatusAccepted, map[string]any{"export": toWireExport(e)})
}

func (s *Server) listExports(w http.ResponseWriter, r *http.Request) {
	list, err := s.svc.Exports(r.Context(), owner(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]Export, 0, len(list))
	for _, e := range list {
		out = append(out, toWireExport(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{"exports": out})
}

func (s *Server) getExport(w http.ResponseWriter, r *http.Request) {
	e, err := s.svc.Export(r.Context(), owner(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"export": toWireExport(e)})
}

// downloadExportFile streams one file with Range support; its ETag is
// its SHA-256, so a client can resume a download and check what it got.
func (s *Server) downloadExportFile(w http.ResponseWriter, r *http.Request) {
	f, meta, err := s.svc.OpenExportFile(r.Context(), owner(r), r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer f.Close()
	// Last-Modified where the store can say; ETag (the SHA-256) always.
	var modTime time.Time
	if st, ok := f.(interface{ Stat() (fs.FileInfo, error) }); ok {
		fi, err := st.Stat()
		if err != nil {
			s.writeError(w, r, core.Errorf(core.KindUnavailable, "read export file %s: %v", meta.Name, err))
			return
		}
		modTime = fi.ModTime()
	}
	h := w.Header()
	h.Set("ETag", `"`+meta.SHA256+`"`)
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="`+meta.Name+`"`)
	h.Set("Cache-Control", "private, no-cache")
	http.ServeContent(w, r, meta.Name, modTime, f)
}
