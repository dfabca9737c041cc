package uibridge

import (
	"encoding/json"
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
	switch f := q.Get("format"); f {
	case "", "json":
	case "jsonl":
		s.streamAudit(w, r, before, q.Get("limit") != "", limit)
		return
	default:
		s.writeError(w, r, core.Errorf(core.KindInvalid, "format must be json (pages) or jsonl (every entry, one per line), not %q", f))
		return
	}
	entries, err := s.svc.Audit(r.Context(), owner(r), before, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page := AuditPage{Entries: make([]AuditEntry, 0, len(entries))}
	for _, e := range entries {
		page.Entries = append(page.Entries, toWireAudit(e))
	}
	if len(entries) == limit && entries[len(entries)-1].ID > 1 {
		next := entries[len(entries)-1].ID
		page.NextBefore = &next
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, page)
}

func toWireAudit(e core.AuditEntry) AuditEntry {
	we := AuditEntry{ID: e.ID, At: wireTime(e.At), Actor: e.Actor, Action: e.Action, WorkspaceID: e.WorkspaceID,
		AccountID: e.AccountID, Provider: e.Provider, Outcome: e.Outcome, PrevHash: e.PrevHash, Hash: e.Hash}
	if e.ExportSHA256 != "" {
		sum := e.ExportSHA256
		we.ExportSHA256 = &sum
	}
	return we
}

// streamAudit writes the caller's entries older than before (0: all),
// newest first, one JSON object per line, for a log shipper: page by
// page, so a long trail costs one page of memory. With capped, at most
// limit entries.
func (s *Server) streamAudit(w http.ResponseWriter, r *http.Request, before int64, capped bool, limit int) {
	first, err := s.svc.Audit(r.Context(), owner(r), before, core.MaxAuditPage)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	rc := http.NewResponseController(w)
	sent := 0
	for page := first; len(page) > 0; {
		for _, e := range page {
			if capped && sent == limit {
				return
			}
			if enc.Encode(toWireAudit(e)) != nil {
				return // the client went away
			}
			sent++
		}
		rc.Flush()
		last := page[len(page)-1].ID
		if len(page) < core.MaxAuditPage || last <= 1 {
			return
		}
		if page, err = s.svc.Audit(r.Context(), owner(r), last, core.MaxAuditPage); err != nil {
			// Headers are sent: the stream ends short, and a shipper
			// goes on with before= the last id it got.
			s.log.Warn("audit stream ended early", "err", err)
			return
		}
	}
}
