package uibridge

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
)

func (s *Server) routes(rt *router) {
	rt.handle("GET /healthz", s.healthz)
	rt.handle("GET /client/companion.js", s.serveClientJS)
	rt.handle("GET "+OpenAPIPath, s.serveOpenAPI)
	rt.handle("GET /v1/providers", s.listProviders)
	rt.handle("GET /v1/accounts", s.listAccounts)
	rt.handle("POST /v1/accounts", s.addAccount)
	rt.handle("GET /v1/accounts/{id}", s.getAccount)
	rt.handle("DELETE /v1/accounts/{id}", s.removeAccount)
	rt.handle("PATCH /v1/accounts/{id}", s.patchAccount)
	rt.handle("GET /v1/workspaces", s.listWorkspaces)
	rt.handle("POST /v1/workspaces", s.createWorkspace)
	rt.handle("GET /v1/workspaces/{id}", s.getWorkspace)
	rt.handle("POST /v1/workspaces/{id}/pause", s.pauseWorkspace)
	rt.handle("POST /v1/workspaces/{id}/resume", s.resumeWorkspace)
	rt.handle("POST /v1/workspaces/{id}/delete-preview", s.previewDelete)
	rt.handle("POST /v1/workspaces/{id}/delete", s.deleteWorkspace)
	rt.handle("PUT /v1/workspaces/{id}/keep", s.setKeep)
	rt.handle("GET /v1/workspaces/{id}/agent", s.getAgent)
	rt.handle("POST /v1/workspaces/{id}/connect", s.connect)
	rt.any("/v1/workspaces/{id}/agent/{rest...}", s.proxyAgent)
	rt.handle("GET /v1/ws", s.serveWS)
	rt.handle("GET /v1/audit", s.listAudit)
	rt.handle("POST /v1/workspaces/{id}/export", s.startExport)
	rt.handle("GET /v1/workspaces/{id}/exports", s.listExports)
	rt.handle("GET /v1/exports", s.listGoneExports)
	rt.handle("GET /v1/exports/{id}", s.getExport)
	rt.handle("GET /v1/exports/{id}/files/{name}", s.downloadExportFile)
	rt.handle("POST /v1/exports/{id}/restore", s.restoreExport)
	rt.handle("GET /v1/exports/{id}/restore-preview", s.previewRestore)
	s.retentionRoutes(rt)
	s.webhookRoutes(rt)
	if s.cfg.Modules != nil {
		rt.handle("POST /v1/providers/inspect", adminOnly(s.inspectModule))
		rt.handle("POST /v1/providers", adminOnly(s.installModule))
		rt.handle("DELETE /v1/providers/{name}", adminOnly(s.removeModule))
	}
	if s.cfg.Metrics != nil {
		rt.handle("GET "+MetricsPath, s.cfg.Metrics.ServeHTTP)
	}
	s.pageRoutes(rt)
	s.loginRoutes(rt)
}

// owner is the identity the gate established for r.
func owner(r *http.Request) string {
	id, _ := IdentityFrom(r.Context())
	return id.Owner
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.cfg.Version})
}

func (s *Server) listProviders(w http.ResponseWriter, r *http.Request) {
	list := s.svc.Providers(r.Context())
	out := make([]Provider, 0, len(list))
	for _, p := range list {
		out = append(out, toWireProvider(p))
	}
	s.addModuleFacts(r.Context(), out)
	g := s.svc.GuardStatus()
	writeJSON(w, http.StatusOK, map[string]any{"providers": out, "deletion_guard": DeletionGuard{
		Runs: g.Runs, MarginSeconds: int64(g.Margin / time.Second), Exports: g.Exports}})
}

// DeletionGuard says how this companion protects work from the
// providers' deletion clocks (core.GuardStatus).
type DeletionGuard struct {
	// Runs: serve exports a workspace its provider paused at least
	// MarginSeconds before its clock runs out; the desktop marks it
	// at risk.
	Runs          bool  `json:"runs"`
	MarginSeconds int64 `json:"margin_seconds"`
	// Exports: exports are configured, so a paused TTL may be set.
	Exports bool `json:"exports"`
}

func (s *Server) listAccounts(w http.ResponseWriter, r *http.Request) {
	list, err := s.svc.Accounts(r.Context(), owner(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]Account, 0, len(list))
	for _, a := range list {
		out = append(out, s.wireAccount(a))
	}
	writeJSON(w, http.StatusOK, map[string]any{"accounts": out})
}

// getAccount answers one account as the list shows it. Another user's
// account that is not shared is not found, as for the list.
func (s *Server) getAccount(w http.ResponseWriter, r *http.Request) {
	acct, err := s.svc.Account(r.Context(), owner(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"account": s.wireAccount(acct)})
}

// wireAccount is an account with its current status, as every account
// route answers it.
func (s *Server) wireAccount(a core.Account) Account {
	return toWireAccount(a, s.svc.AccountStatusOf(a.ID))
}

type addAccountBody struct {
	Provider    string            `json:"provider"`
	Label       string            `json:"label"`
	Config      map[string]string `json:"config"`
	Credentials map[string]string `json:"credentials"`
}

func (s *Server) addAccount(w http.ResponseWriter, r *http.Request) {
	var body addAccountBody
	if !s.decodeBody(w, r, &body, false) {
		return
	}
	if strings.TrimSpace(body.Provider) == "" {
		writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid), "provider is required; GET /v1/providers lists the installed ones")
		return
	}
	acct, err := s.svc.AddAccount(r.Context(), owner(r), core.AddAccountRequest{
		Provider:    body.Provider,
		Label:       body.Label,
		Config:      body.Config,
		Credentials: body.Credentials,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/accounts/"+acct.ID)
	writeJSON(w, http.StatusCreated, map[string]any{"account": s.wireAccount(acct)})
}

func (s *Server) removeAccount(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.RemoveAccount(r.Context(), owner(r), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listWorkspaces answers from the stream's encoded cache, so its rev is
// one the stream understands (?since=rev) and a list of 10,000 workspaces
// costs a concatenation. It first lets the cache catch up with the feed,
// so a client sees its own completed writes.
func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	s.hub.waitFor(ctx, s.svc.Feed().Rev())
	cancel()
	rev, items := s.hub.list(owner(r))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	head := []byte(`{"rev":`)
	head = strconv.AppendInt(head, rev, 10)
	head = append(head, `,"server_time":"`...)
	head = wireTime(s.cfg.Now()).AppendFormat(head, time.RFC3339Nano)
	head = append(head, `","workspaces":[`...)
	w.Write(head)
	for i, e := range items {
		if i > 0 {
			w.Write([]byte{','})
		}
		w.Write(e.json)
	}
	w.Write([]byte("]}\n"))
}

func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request) {
	ws, err := s.svc.Workspace(owner(r), r.PathValue("id"))
	s.answerWorkspace(w, r, http.StatusOK, ws, err)
}

func (s *Server) answerWorkspace(w http.ResponseWriter, r *http.Request, status int, ws core.Workspace, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, map[string]any{"workspace": toWireWorkspace(ws)})
}

type createWorkspaceBody struct {
	AccountID string            `json:"account_id"`
	Name      string            `json:"name"`
	Lifecycle *Lifecycle        `json:"lifecycle"`
	Options   map[string]string `json:"options"`
}

// maxLifecycleSeconds keeps durations far from time.Duration's overflow.
const maxLifecycleSeconds = 10 * 365 * 24 * 3600

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request) {
	var body createWorkspaceBody
	if !s.decodeBody(w, r, &body, false) {
		return
	}
	if body.AccountID == "" {
		writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid), "account_id is required; GET /v1/accounts lists yours")
		return
	}
	var lc core.Lifecycle
	if l := body.Lifecycle; l != nil {
		for name, v := range map[string]int64{"idle_pause_after_seconds": l.IdlePauseAfterSeconds, "paused_ttl_seconds": l.PausedTTLSeconds} {
			if v < 0 || v > maxLifecycleSeconds {
				writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid), "lifecycle."+name+" must be between 0 and 315360000 (ten years)")
				return
			}
		}
		lc = core.Lifecycle{
			IdlePauseAfter: time.Duration(l.IdlePauseAfterSeconds) * time.Second,
			PausedTTL:      time.Duration(l.PausedTTLSeconds) * time.Second,
		}
	}
	ws, err := s.svc.Create(r.Context(), owner(r), core.CreateRequest{
		AccountID: body.AccountID,
		Name:      body.Name,
		Lifecycle: lc,
		Options:   body.Options,
	})
	if err == nil {
		w.Header().Set("Location", "/v1/workspaces/"+ws.ID)
	}
	s.answerWorkspace(w, r, http.StatusAccepted, ws, err)
}

// emptyBody is what routes without parameters accept: nothing, or {}.
type emptyBody struct{}

func (s *Server) pauseWorkspace(w http.ResponseWriter, r *http.Request) {
	if !s.decodeBody(w, r, &emptyBody{}, true) {
		return
	}
	ws, err := s.svc.Pause(r.Context(), owner(r), r.PathValue("id"))
	s.answerWorkspace(w, r, http.StatusAccepted, ws, err)
}

func (s *Server) resumeWorkspace(w http.ResponseWriter, r *http.Request) {
	if !s.decodeBody(w, r, &emptyBody{}, true) {
		return
	}
	ws, err := s.svc.Resume(r.Context(), owner(r), r.PathValue("id"))
	s.answerWorkspace(w, r, http.StatusAccepted, ws, err)
}

func (s *Server) previewDelete(w http.ResponseWriter, r *http.Request) {
	if !s.decodeBody(w, r, &emptyBody{}, true) {
		return
	}
	p, err := s.svc.PreviewDelete(r.Context(), owner(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := DeletePreview{
		Workspace: toWireWorkspace(p.Workspace),
		Token:     p.Token,
		ExpiresAt: wireTime(p.ExpiresAt),
		Lost:      p.Lost,
		Survives:  p.Survives,
		Export:    toWireExportPlan(p.Export),
	}
	if out.Lost == nil {
		out.Lost = []string{}
	}
	if out.Survives == nil {
		out.Survives = []string{}
	}
	writeJSON(w, http.StatusOK, out)
}

type deleteBody struct {
	Token string `json:"token"`
}

func (s *Server) deleteWorkspace(w http.ResponseWriter, r *http.Request) {
	var body deleteBody
	if !s.decodeBody(w, r, &body, false) {
		return
	}
	ws, err := s.svc.Delete(r.Context(), owner(r), r.PathValue("id"), body.Token)
	s.answerWorkspace(w, r, http.StatusAccepted, ws, err)
}

type keepBody struct {
	Keep *bool `json:"keep"`
}

func (s *Server) setKeep(w http.ResponseWriter, r *http.Request) {
	var body keepBody
	if !s.decodeBody(w, r, &body, false) {
		return
	}
	if body.Keep == nil {
		writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid), `keep is required: {"keep": true} or {"keep": false}`)
		return
	}
	ws, err := s.svc.SetKeep(r.Context(), owner(r), r.PathValue("id"), *body.Keep)
	s.answerWorkspace(w, r, http.StatusOK, ws, err)
}
