package uibridge

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/canvasapp/companion/core"
)

// retentionRoutes adds the retention routes (API.md, "Retention").
func (s *Server) retentionRoutes(rt *router) {
	rt.handle("GET /v1/accounts/{id}/retention", s.getRetention)
	rt.handle("PUT /v1/accounts/{id}/retention", s.putRetention)
	rt.handle("POST /v1/accounts/{id}/retention/preview", s.previewRetention)
}

// RetentionPolicy is an account's retention policy on the wire.
type RetentionPolicy struct {
	AccountID               string     `json:"account_id"`
	Enabled                 bool       `json:"enabled"`
	PausedForSeconds        int64      `json:"paused_for_seconds"`
	WarnBeforeSeconds       int64      `json:"warn_before_seconds"`
	StoragePricePerGiBMonth *float64   `json:"storage_price_per_gib_month"`
	ExportsKeptForSeconds   int64      `json:"exports_kept_for_seconds"`
	UpdatedAt               *time.Time `json:"updated_at"`
}

// RetentionScheduler says whether this companion deletes on a timer at
// all (serve mode only) and what its tick has done.
type RetentionScheduler struct {
	ScheduledDeletion bool       `json:"scheduled_deletion"`
	IntervalSeconds   float64    `json:"interval_seconds"`
	Ticks             int64      `json:"ticks"`
	LastTickAt        *time.Time `json:"last_tick_at"`
}

// retentionBody is a proposed policy. PUT replaces the whole policy:
// an absent warn_before_seconds is the default (one day), an absent or
// null storage price is none, an absent exports_kept_for_seconds keeps
// exports for ever.
type retentionBody struct {
	Enabled                 *bool    `json:"enabled"`
	PausedForSeconds        *int64   `json:"paused_for_seconds"`
	WarnBeforeSeconds       *int64   `json:"warn_before_seconds"`
	StoragePricePerGiBMonth *float64 `json:"storage_price_per_gib_month"`
	ExportsKeptForSeconds   *int64   `json:"exports_kept_for_seconds"`
}

func (b retentionBody) policy(accountID string, enabledDefault bool) core.RetentionPolicy {
	p := core.RetentionPolicy{AccountID: accountID, Enabled: enabledDefault, WarnBefore: core.DefaultRetentionWarning,
		StoragePricePerGiBMonth: b.StoragePricePerGiBMonth}
	if b.Enabled != nil {
		p.Enabled = *b.Enabled
	}
	if b.PausedForSeconds != nil {
		p.PausedFor = seconds(*b.PausedForSeconds)
	}
	if b.WarnBeforeSeconds != nil {
		p.WarnBefore = seconds(*b.WarnBeforeSeconds)
	}
	if b.ExportsKeptForSeconds != nil {
		p.ExportsKeptFor = seconds(*b.ExportsKeptForSeconds)
	}
	return p
}

// seconds converts without overflow: anything beyond a policy's range
// stays beyond it, and validation names the field.
func seconds(n int64) time.Duration {
	const limit = int64(1<<63-1) / int64(time.Second)
	switch {
	case n > limit:
		return time.Duration(1<<63 - 1)
	case n < -limit:
		return -time.Duration(1<<63 - 1)
	}
	return time.Duration(n) * time.Second
}

func toWireRetention(p core.RetentionPolicy) RetentionPolicy {
	return RetentionPolicy{AccountID: p.AccountID, Enabled: p.Enabled, PausedForSeconds: int64(p.PausedFor / time.Second),
		WarnBeforeSeconds: int64(p.WarnBefore / time.Second), StoragePricePerGiBMonth: p.StoragePricePerGiBMonth,
		ExportsKeptForSeconds: int64(p.ExportsKeptFor / time.Second), UpdatedAt: wireTimePtr(p.UpdatedAt)}
}

func (s *Server) retentionAnswer(w http.ResponseWriter, p core.RetentionPolicy) {
	st := s.svc.RetentionStatus()
	writeJSON(w, http.StatusOK, map[string]any{"retention": toWireRetention(p), "scheduler": RetentionScheduler{
		ScheduledDeletion: st.ScheduledDeletion, IntervalSeconds: st.Interval.Seconds(), Ticks: st.Ticks, LastTickAt: wireTimePtr(st.LastTickAt)}})
}

func (s *Server) getRetention(w http.ResponseWriter, r *http.Request) {
	p, err := s.svc.RetentionPolicyOf(r.Context(), owner(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.retentionAnswer(w, p)
}

func (s *Server) putRetention(w http.ResponseWriter, r *http.Request) {
	var body retentionBody
	if !s.decodeBody(w, r, &body, false) {
		return
	}
	if body.Enabled == nil {
		writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid), `enabled is required: {"enabled": true, "paused_for_seconds": 604800} or {"enabled": false}`)
		return
	}
	p, err := s.svc.SetRetentionPolicy(r.Context(), owner(r), body.policy(r.PathValue("id"), false))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.retentionAnswer(w, p)
}

// RetentionPreviewItem is one workspace a proposed policy would delete.
type RetentionPreviewItem struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	State      string     `json:"state"`
	PausedAt   *time.Time `json:"paused_at"`
	DeleteAt   time.Time  `json:"delete_at"`
	SizeBytes  *int64     `json:"size_bytes"`
	SizeSource string     `json:"size_source,omitempty"`
}

func (s *Server) previewRetention(w http.ResponseWriter, r *http.Request) {
	var body retentionBody
	if !s.decodeBody(w, r, &body, false) {
		return
	}
	if body.PausedForSeconds == nil && body.ExportsKeptForSeconds == nil {
		writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid), `paused_for_seconds or exports_kept_for_seconds is required: the proposed policy, e.g. {"paused_for_seconds": 604800} or {"enabled": false, "exports_kept_for_seconds": 7776000}`)
		return
	}
	pv, err := s.svc.PreviewRetention(r.Context(), owner(r), body.policy(r.PathValue("id"), true))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items := make([]RetentionPreviewItem, 0, len(pv.Workspaces))
	for _, it := range pv.Workspaces {
		ws := it.Workspace
		item := RetentionPreviewItem{ID: ws.ID, Name: ws.Name, State: string(ws.State), PausedAt: wireTimePtr(ws.PausedAt), DeleteAt: wireTime(it.DeleteAt)}
		if ws.Size != nil {
			b := ws.Size.Bytes
			item.SizeBytes, item.SizeSource = &b, string(ws.Size.Source)
		}
		items = append(items, item)
	}
	exports := make([]ExportExpiryItem, 0, len(pv.Exports.Exports))
	for _, it := range pv.Exports.Exports {
		e := it.Export
		exports = append(exports, ExportExpiryItem{ID: e.ID, WorkspaceID: e.WorkspaceID, WorkspaceName: e.WorkspaceName,
			State: e.State, CreatedAt: wireTime(e.CreatedAt), Bytes: e.Bytes, Kept: it.Kept})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"policy":             toWireRetention(pv.Policy),
		"workspaces":         items,
		"reclaim_bytes":      pv.ReclaimBytes,
		"unknown_sizes":      pv.UnknownSizes,
		"monthly_savings":    pv.MonthlySavings,
		"scheduled_deletion": pv.ScheduledDeletion,
		"notes":              nonNilStrings(pv.Notes),
		"exports": map[string]any{
			"due":           exports,
			"removed":       pv.Exports.Removed,
			"removed_bytes": pv.Exports.Bytes,
			"more":          pv.Exports.More,
		},
	})
}

// ExportExpiryItem is one export a proposed export retention finds due:
// removed at the next tick, or kept (Kept says why).
type ExportExpiryItem struct {
	ID            string    `json:"id"`
	WorkspaceID   string    `json:"workspace_id"`
	WorkspaceName string    `json:"workspace_name"`
	State         string    `json:"state"`
	CreatedAt     time.Time `json:"created_at"`
	Bytes         int64     `json:"bytes"`
	Kept          string    `json:"kept,omitempty"`
}

// noticeBuffer is how many notices may wait for the hub; beyond that some
// are dropped (each workspace's delete_after stays authoritative).
const noticeBuffer = 1024

// followNotices queues a "notice" frame for every client of the
// workspace's owner, until the hub stops. Like account frames, notices sit
// outside the revision sequence and are not replayed on reconnect.
func (h *hub) followNotices(svc *core.Service) {
	notices, stop := svc.SubscribeNotices(noticeBuffer)
	defer stop()
	for {
		select {
		case <-h.stop:
			return
		case n := <-notices:
			fr := &frame{event: true, pm: prepare(noticeFrame(h.now(), n))}
			h.mu.Lock()
			for c := range h.clients[n.Owner] {
				if ok, overflow := c.push(fr, h.queueLimit); !ok {
					h.removeLocked(c)
					if overflow {
						h.overflows.Add(1)
					}
				}
			}
			h.mu.Unlock()
		}
	}
}

func noticeFrame(now time.Time, n core.Notice) []byte {
	b, err := json.Marshal(struct {
		Type        string    `json:"type"`
		Kind        string    `json:"kind"`
		ServerTime  time.Time `json:"server_time"`
		WorkspaceID string    `json:"workspace_id"`
		DeleteAfter time.Time `json:"delete_after"`
	}{"notice", n.Kind, wireTime(now), n.WorkspaceID, wireTime(n.DeleteAfter)})
	if err != nil {
		panic("uibridge: encoding a notice: " + err.Error())
	}
	return b
}

// nonNilStrings makes an absent list an empty one on the wire.
func nonNilStrings(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
