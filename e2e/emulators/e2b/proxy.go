package e2b

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// TrafficTokenHeader carries a private sandbox's traffic access token.
const TrafficTokenHeader = "e2b-traffic-access-token"

// trafficSeed stands in for the API's secret seed.
var trafficSeed = []byte("e2b-emulator-traffic-seed")

// trafficToken is HMAC-SHA256(seed, "sandbox-traffic-"+id) like the API's
// (sandbox_envd_secret.go): stable for the life of the id.
func trafficToken(id string) string {
	m := hmac.New(sha256.New, trafficSeed)
	m.Write([]byte("sandbox-traffic-" + id))
	return hex.EncodeToString(m.Sum(nil))
}

// SetDomain sets the sandbox domain create and connect report (host[:port]
// in tests, e.g. "localhost:PORT"); requests whose Host is
// {port}-{sandboxID}.{domain} are then served by the sandbox proxy.
func (s *Server) SetDomain(domain string) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.domain = strings.ToLower(domain)
}

func (s *Server) domainNow() string {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	return s.domain
}

func (s *Server) withDomain(c Created) Created {
	if d := s.domainNow(); d != "" {
		c.Domain = &d
	}
	return c
}

// withProxy routes requests addressed to a sandbox host to the proxy.
func (s *Server) withProxy(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := s.domainNow()
		host := strings.ToLower(r.Host)
		if d == "" || !strings.HasSuffix(host, "."+d) {
			api.ServeHTTP(w, r)
			return
		}
		port, id, ok := strings.Cut(strings.TrimSuffix(host, "."+d), "-")
		if !ok {
			s.fail(w, http.StatusBadRequest, "invalid sandbox host")
			return
		}
		s.proxy(w, r, port, id)
	})
}

// proxy is the orchestrator's sandbox proxy: a private sandbox needs the
// traffic token (403 otherwise); traffic never extends the sandbox's TTL
// (only connect, refreshes and timeout do). A paused sandbox answers 502
// [uncertain: auto-resume on traffic is not emulated].
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, port, id string) {
	s.mu.Lock()
	s.settleLocked()
	sb, ok := s.boxes[id]
	var private, running bool
	if ok {
		private, running = sb.Private, sb.State == StateRunning
	}
	s.mu.Unlock()
	switch {
	case !ok:
		s.fail(w, http.StatusBadGateway, "sandbox "+id+" not found")
		return
	case private && subtle.ConstantTimeCompare([]byte(r.Header.Get(TrafficTokenHeader)), []byte(trafficToken(id))) != 1:
		s.fail(w, http.StatusForbidden, "missing or invalid traffic access token")
		return
	case !running:
		s.fail(w, http.StatusBadGateway, "sandbox "+id+" is not running")
		return
	case port == "8000" && r.URL.Path == "/server_info":
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"uptime": 1, "idle_time": 0, "title": "e2b emulator sandbox " + id, "version": "emulated"})
	default:
		s.fail(w, http.StatusBadGateway, "nothing listens on port "+port)
	}
}
