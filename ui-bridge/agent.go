package uibridge

import (
	"net/http"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
)

// AgentInfo is the answer of GET /v1/workspaces/{id}/agent: what the box's
// agent-server says of itself, read through its provider's endpoint.
type AgentInfo struct {
	IdleSeconds   float64 `json:"idle_seconds"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	Version       string  `json:"version"`
}

// getAgent is a person-initiated read that reaches into the box: it asks
// the adapter for the endpoint and calls /server_info, which does not move
// the agent-server's idle clock (Daytona's proxy still counts the request
// as activity; box-endpoints.md). Never called by a timer.
func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) {
	acc, err := s.svc.AgentTarget(r.Context(), owner(r), r.PathValue("id"), false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	hdr := http.Header{}
	for k, v := range acc.Endpoint.Headers {
		hdr.Set(k, v)
	}
	c, err := agentclient.New(agentclient.Endpoint{URL: acc.Endpoint.URL, Headers: hdr, SessionKey: acc.Key}, s.cfg.AgentHTTP)
	if err != nil {
		s.writeError(w, r, core.Errorf(core.KindInternal, "the provider reported an unusable agent-server endpoint: %v", err))
		return
	}
	si, err := c.ServerInfo(r.Context())
	if err != nil {
		s.writeError(w, r, core.Errorf(core.KindUnavailable, "the box's agent-server did not answer: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"agent": AgentInfo{IdleSeconds: si.IdleTime, UptimeSeconds: si.Uptime, Version: si.Version}})
}
