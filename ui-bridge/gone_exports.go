package uibridge

import (
	"net/http"
	"strconv"

	"github.com/canvasapp/companion/core"
)

// GoneExportsPage is GET /v1/exports?gone=true's answer. NextBefore is
// the before= of the next (older) page, null on the last one. A page may
// hold fewer than limit exports (even none) while NextBefore is set:
// companion reads a bounded number of records per request.
type GoneExportsPage struct {
	Exports    []Export `json:"exports"`
	NextBefore *string  `json:"next_before"`
}

// listGoneExports lists the exports of your workspaces that no longer
// exist ("Deleted workspaces"). It is the only listing of exports:
// those of a live workspace are under /v1/workspaces/{id}/exports.
func (s *Server) listGoneExports(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	gone, err := boolParam(q, "gone")
	if err == nil && !gone {
		err = core.Errorf(core.KindInvalid, "GET /v1/exports lists only the exports of deleted workspaces: ask with gone=true (a workspace's exports are at GET /v1/workspaces/{id}/exports)")
	}
	limit := 0
	if v := q.Get("limit"); err == nil && v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n <= 0 || n > core.MaxGonePage {
			err = core.Errorf(core.KindInvalid, "limit must be a whole number from 1 to %d, not %q", core.MaxGonePage, v)
		}
		limit = n
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, next, err := s.svc.GoneExports(r.Context(), owner(r), q.Get("before"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page := GoneExportsPage{Exports: make([]Export, 0, len(list)), NextBefore: strPtr(next)}
	for _, e := range list {
		page.Exports = append(page.Exports, toWireExport(e))
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, page)
}
