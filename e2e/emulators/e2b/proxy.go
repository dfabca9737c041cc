package e2b

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

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

// Endpoint is how a client reaches a sandbox's port, for tests and the
// admin route: {port}-{id}.{domain} (connectionConfig.ts getHost) and, for
// a private sandbox, the traffic token create and connect return. It does
// not go through the API, so it neither extends the TTL nor is logged.
func (s *Server) Endpoint(id string, port int) (emulator.Endpoint, error) {
	d := s.domainNow()
	if d == "" {
		return emulator.Endpoint{}, errors.New("e2b: no sandbox domain (SetDomain)")
	}
	sb, ok := s.Sandbox(id)
	if !ok {
		return emulator.Endpoint{}, fmt.Errorf("e2b: no sandbox %q", id)
	}
	ep := emulator.Endpoint{URL: "http://" + strconv.Itoa(port) + "-" + id + "." + d, Headers: map[string]string{}}
	if sb.Private {
		ep.Headers[TrafficTokenHeader] = trafficToken(id)
	}
	return ep, nil
}

// autoResumeTimeout is the least TTL a sandbox resumed by traffic gets
// (docs auto-resume: "a 5-minute minimum timeout").
const autoResumeTimeout = 5 * time.Minute

// proxy is the orchestrator's sandbox proxy: a private sandbox needs the
// traffic token (403 otherwise); traffic never extends a running
// sandbox's TTL (only connect, refreshes and timeout do). A paused
// sandbox created with autoResume is resumed by the request, with a TTL
// of at least five minutes, once its token checks out (client-proxy
// proxy.go); one without answers 502 [uncertain: not in the reference].
// Port 8000 goes to Options.AgentServer when set, with the server's own
// ResponseWriter (streams and WebSocket upgrades pass); the traffic token
// header is passed on [uncertain: whether the proxy strips it].
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, port, id string) {
	s.mu.Lock()
	s.settleLocked()
	sb, ok := s.boxes[id]
	switch {
	case !ok:
		s.mu.Unlock()
		s.fail(w, http.StatusBadGateway, "sandbox "+id+" not found")
		return
	case sb.Private && subtle.ConstantTimeCompare([]byte(r.Header.Get(TrafficTokenHeader)), []byte(trafficToken(id))) != 1:
		s.mu.Unlock()
		s.fail(w, http.StatusForbidden, "missing or invalid traffic access token")
		return
	case sb.State == StatePaused && sb.AutoResume:
		if s.concurrencyLocked(w) {
			s.mu.Unlock()
			return
		}
		s.resumeLocked(sb, s.Clock().Now(), autoResumeTimeout)
	}
	running := sb.State == StateRunning
	s.mu.Unlock()
	switch {
	case !running:
		s.fail(w, http.StatusBadGateway, "sandbox "+id+" is not running")
	case port == "8000" && s.opts.AgentServer != nil:
		s.opts.AgentServer(id).ServeHTTP(w, r)
	case port == "8000" && r.URL.Path == "/server_info":
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"uptime": 1, "idle_time": 0, "title": "e2b emulator sandbox " + id, "version": "emulated"})
	default:
		portClosed(w, id, port)
	}
}

// portClosed is the proxy's answer when nothing listens on the port, as
// a non-browser client gets it: 502 {sandboxId, message, port} (infra
// packages/shared/pkg/proxy/template/port_closed.go).
func portClosed(w http.ResponseWriter, id, port string) {
	emulator.WriteJSON(w, http.StatusBadGateway, map[string]string{
		"sandboxId": id, "message": "The sandbox is running but port is not open", "port": port,
	})
}
