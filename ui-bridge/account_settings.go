package uibridge

import (
	"net/http"

	"github.com/canvasapp/companion/core"
)

// accountPatch is the body of PATCH /v1/accounts/{id}: the account's
// settings to change. Fields left out keep their value.
type accountPatch struct {
	// DeleteExport is "required" (a delete whose export fails is blocked)
	// or "best_effort" (it goes ahead without the export).
	DeleteExport *string `json:"delete_export"`
}

func (s *Server) patchAccount(w http.ResponseWriter, r *http.Request) {
	var body accountPatch
	if !s.decodeBody(w, r, &body, false) {
		return
	}
	if body.DeleteExport == nil {
		writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid), `nothing to change: send {"delete_export": "required"} or {"delete_export": "best_effort"}`)
		return
	}
	acct, err := s.svc.SetDeleteExport(r.Context(), owner(r), r.PathValue("id"), core.DeleteExportMode(*body.DeleteExport))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"account": s.wireAccount(acct)})
}

// DeleteExportPlan is the wire form of what a delete exports first
// (DeletePreview.Export).
type DeleteExportPlan struct {
	// Will is false when no export is made; Why then says why.
	Will bool   `json:"will"`
	Why  string `json:"why,omitempty"`
	// Mode is the account's delete_export: "required" or "best_effort".
	Mode     string   `json:"mode"`
	Captures []string `json:"captures"`
	Format   string   `json:"format"`
	// ArchivePath is the directory in the box that is archived.
	ArchivePath string `json:"archive_path"`
	// Wake is true when the box must be woken for the export.
	Wake bool `json:"wake"`
	// Snapshot is true when the export holds the provider's snapshot of
	// the box besides the agent-server's files.
	Snapshot bool   `json:"snapshot"`
	Location string `json:"location,omitempty"`
	// NeverArchived names what no export holds.
	NeverArchived []string `json:"never_archived"`
}

func toWireExportPlan(p core.DeleteExportPlan) *DeleteExportPlan {
	out := &DeleteExportPlan{Will: p.Will, Why: p.Why, Mode: string(p.Mode), Captures: p.Captures, Format: p.Format,
		ArchivePath: p.ArchivePath, Wake: p.Wake, Snapshot: p.Snapshot, Location: p.Location, NeverArchived: core.NeverArchived()}
	if out.Captures == nil {
		out.Captures = []string{}
	}
	return out
}
