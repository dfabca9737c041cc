package digitalocean

import (
	"fmt"
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
	s.withSession(w, r, func(e *entry) {
		ing, err := s.publishLocked(e)
		if err != nil {
			s.fail(w, err.status, err.msg)
			return
		}
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"ingress_url": ing})
	})
}

type ingressErr struct {
	status int
	msg    string
}

// publishLocked returns e's ingress_url object, publishing a new hostname
// when e has none (first call, or the first after a pause revoked it).
func (s *Server) publishLocked(e *entry) (map[string]any, *ingressErr) {
	scheme, domain := s.ingressBase()
	if e.s.Status != StatusReady && e.s.Status != StatusDetached {
		return nil, &ingressErr{http.StatusConflict, "session is " + e.s.Status + "; its ingress is published only while it runs"}
	}
	if domain == "" {
		return nil, &ingressErr{http.StatusInternalServerError, "ingress domain not configured"}
	}
	if e.ingress == "" {
		e.ingress = strings.ToLower(strings.ReplaceAll(emulator.UUID(), "-", "")[:12])
		e.ingressAt = s.Clock().Now()
	}
	return map[string]any{
		"ingress_url_id": "ing-" + e.ingress, "session_id": e.s.SessionID, "port": 8000,
		"url":   scheme + "://" + e.ingress + "." + domain,
		"state": "INGRESS_URL_STATE_READY", "created_at": e.ingressAt.UTC().Format(time.RFC3339),
	}, nil
}

// Endpoint is what GET .../ingress tells a client, for tests and the admin
// route: the session's ingress URL, published if it has none (as the API's
// first call does). The DO token the ingress wants is the account's, so
// no header is named. It does not go through the API, so it is not logged.
func (s *Server) Endpoint(id string) (emulator.Endpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	e, ok := s.sessions[id]
	if !ok {
		return emulator.Endpoint{}, fmt.Errorf("digitalocean: no session %q", id)
	}
	ing, err := s.publishLocked(e)
	if err != nil {
		return emulator.Endpoint{}, fmt.Errorf("digitalocean: session %s: %s", id, err.msg)
	}
	return emulator.Endpoint{URL: ing["url"].(string)}, nil
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
// ingress label: one a pause, a lock or a delete revoked answers 404, as
// does one never published. It forwards to Options.AgentServer when set,
// with the server's own ResponseWriter (streams and WebSocket upgrades
// pass), Authorization included [uncertain: whether DO strips it].
// Whether ingress traffic counts as session activity is not in the
// reference; the emulator does not count it.
func (s *Server) ingressProxy(w http.ResponseWriter, r *http.Request, label string) {
	if s.tokens.CheckBearer(r) != emulator.AuthOK {
		s.gatewayFail(w, http.StatusUnauthorized, "unauthorized", "Unable to authenticate you")
		return
	}
	s.mu.Lock()
	s.settleLocked()
	id := ""
	for _, e := range s.sessions {
		if e.ingress != "" && e.ingress == label {
			id = e.s.SessionID
			break
		}
	}
	s.mu.Unlock()
	switch {
	case id == "":
		s.fail(w, http.StatusNotFound, "no such ingress")
	case s.opts.AgentServer != nil:
		s.opts.AgentServer(id).ServeHTTP(w, r)
	case r.URL.Path == "/server_info":
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"uptime": 1, "idle_time": 0, "title": "digitalocean emulator session", "version": "emulated"})
	default:
		s.fail(w, http.StatusBadGateway, "nothing answers "+r.URL.Path)
	}
}
