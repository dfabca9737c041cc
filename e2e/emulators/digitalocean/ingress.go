package digitalocean

import (
	"net/http"
	"strings"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// SetIngressDomain sets the domain of published ingress URLs (host[:port]
// in tests, e.g. "localhost:PORT"; DO's is {region}.sandbox.ondigitalocean.com)
// and the scheme they use. Requests whose Host is {label}.{domain} are then
// served by the ingress proxy instead of the API.
func (s *Server) SetIngressDomain(scheme, domain string) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.domain = scheme + "://" + strings.ToLower(domain)
}

func (s *Server) ingressBase() (scheme, domain string) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	scheme, domain, _ = strings.Cut(s.domain, "://")
	return scheme, domain
}

// getIngress serves GET /v2/agents/sessions/{id}/ingress (and the renamed
// /v2/harness-runtime/... path): the URL fronting guest port 8000 (the
// OpenHands agent-server), published on the first call. Only a READY or
// DETACHED session has one [uncertain: the reference does not say what a
// paused session answers; 409 chosen]. Always READY here: the emulator
// publishes instantly, so the module's not-ready path is not exercised.
func (s *Server) getIngress(w http.ResponseWriter, r *http.Request) {
	scheme, domain := s.ingressBase()
	s.withSession(w, r, func(e *entry) {
		if e.s.Status != StatusReady && e.s.Status != StatusDetached {
			s.fail(w, http.StatusConflict, "session is "+e.s.Status+"; its ingress is published only while it runs")
			return
		}
		if domain == "" {
			s.fail(w, http.StatusInternalServerError, "ingress domain not configured")
			return
		}
		if e.ingress == "" {
			e.ingress = strings.ToLower(strings.ReplaceAll(emulator.UUID(), "-", "")[:12])
		}
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"ingress_url": map[string]any{
			"ingress_url_id": "ing-" + e.ingress, "session_id": e.s.SessionID, "port": 8000,
			"url":   scheme + "://" + e.ingress + "." + domain,
			"state": "INGRESS_URL_STATE_READY", "created_at": s.Clock().Now().UTC().Format(time.RFC3339),
		}})
	})
}

// withIngress routes requests addressed to an ingress host to the proxy.
func (s *Server) withIngress(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, domain := s.ingressBase()
		host := strings.ToLower(r.Host)
		if domain == "" || !strings.HasSuffix(host, "."+domain) {
			api.ServeHTTP(w, r)
			return
		}
		s.ingressProxy(w, r, strings.TrimSuffix(host, "."+domain))
	})
}

// ingressProxy wants the DO token as Bearer (401 otherwise) and a live
// ingress label (a revoked one is 404). Whether ingress traffic counts as
// session activity is not in the reference; the emulator does not count it.
func (s *Server) ingressProxy(w http.ResponseWriter, r *http.Request, label string) {
	if s.tokens.CheckBearer(r) != emulator.AuthOK {
		s.fail(w, http.StatusUnauthorized, "Unable to authenticate you")
		return
	}
	s.mu.Lock()
	s.settleLocked()
	var found *entry
	for _, e := range s.sessions {
		if e.ingress != "" && e.ingress == label {
			found = e
			break
		}
	}
	s.mu.Unlock()
	if found == nil {
		s.fail(w, http.StatusNotFound, "no such ingress")
		return
	}
	if r.URL.Path == "/server_info" {
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"uptime": 1, "idle_time": 0, "title": "digitalocean emulator session", "version": "emulated"})
		return
	}
	s.fail(w, http.StatusBadGateway, "nothing answers "+r.URL.Path)
}
