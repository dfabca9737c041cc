package uibridge

import (
	"net/http"
	"strconv"
	"time"

	"github.com/canvasapp/companion/core"
)

// AuditEntry is one audit trail entry as front ends see it.
type AuditEntry struct {
	ID           int64     `json:"id"`
	At           time.Time `json:"at"`
	Actor        string    `json:"actor"`
	Action       string    `json:"action"`
	WorkspaceID  string    `json:"workspace_id"`
	AccountID    string    `json:"account_id"`
	Provider     string    `json:"provider"`
	Outcome      string    `json:"outcome"`
	ExportSHA256 *string   `json:"export_sha256"`
	PrevHash     string    `json:"prev_hash"`
	Hash         string    `json:"hash"`
}

// AuditPage is the answer of GET /v1/audit. NextBefore is the before=
// value of the next (older) page, null on the last one.
type AuditPage struct {
	Entries    []AuditEntry `json:"entries"`
	NextBefore *int64       `json:"next_before"`
}

const defaultAuditLimit = 100

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	before, limit := int64(0), defaultAuditLimit
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			s.writeError(w, r, core.Errorf(core.KindInvalid, "before must be a positive entry id, not %q", v))
			return
		}
		before = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > core.MaxAuditPage {
			s.writeError(w, r, core.Errorf(core.KindInvalid, "limit must be a whole number from 1 to %d, not %q", core.MaxAuditPage, v))
			return
		}
		limit = n
	}
	entries, err := s.svc.Audit(r.Context(), owner(r), before, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page := AuditPage{Entries: make([]AuditEntry, 0, len(entries))}
	for _, e := range entries {
		we := AuditEntry{ID: e.ID, At: wireTime(e.At), Actor: e.Actor, Action: e.Action, WorkspaceID: e.WorkspaceID,
			AccountID: e.AccountID, Provider: e.Provider, Outcome: e.Outcome, PrevHash: e.PrevHash, Hash: e.Hash}
		if e.ExportSHA256 != "" {
			sum := e.ExportSHA256
			we.ExportSHA256 = &sum
		}
		page.Entries = append(page.Entries, we)
	}
	if len(entries) == limit && entries[len(entries)-1].ID > 1 {
		next := entries[len(entries)-1].ID
		page.NextBefore = &next
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, page)
}
