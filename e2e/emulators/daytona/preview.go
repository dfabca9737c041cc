package daytona

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// PreviewTokenHeader carries a sandbox's preview token to the proxy.
const PreviewTokenHeader = "X-Daytona-Preview-Token"

// skipActivityHeader opts one proxied request out of the auto-stop reset.
const skipActivityHeader = "X-Daytona-Skip-Last-Activity-Update"

// SetProxy sets where preview URLs point: protocol ("http" in tests) and
// the proxy domain, host[:port]. Requests whose Host is
// {port}-{sandboxId}.{domain} are then served by the preview proxy instead
// of the API. Call it once the listener's port is known.
func (s *Server) SetProxy(protocol, domain string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proxyProtocol, s.proxyDomain = protocol, strings.ToLower(domain)
}

// previewURL serves GET /sandbox/{idOrName}/ports/{port}/preview-url →
// PortPreviewUrl{sandboxId,url,token}. Port 1-65535; a stopped box still
// gets a URL (sandbox.service.ts getPortPreviewUrl).
func (s *Server) previewURL(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		s.badRequest(w, r, "Invalid port")
		return
	}
	s.withBox(w, r, func(b *box) {
		if s.proxyDomain == "" {
			s.fail(w, r, http.StatusInternalServerError, "Proxy domain not configured", "")
			return
		}
		emulator.WriteJSON(w, http.StatusOK, map[string]string{
			"sandboxId": b.sb.ID,
			"url":       s.proxyProtocol + "://" + strconv.Itoa(port) + "-" + b.sb.ID + "." + s.proxyDomain,
			"token":     s.tokenLocked(b),
		})
	})
}

func (s *Server) tokenLocked(b *box) string {
	if b.previewToken == "" {
		b.previewToken = emulator.UUID()
	}
	return b.previewToken
}

// withProxy routes requests addressed to a preview host to the proxy.
func (s *Server) withProxy(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		domain := s.proxyDomain
		s.mu.Unlock()
		host := strings.ToLower(r.Host)
		if domain == "" || !strings.HasSuffix(host, "."+domain) {
			api.ServeHTTP(w, r)
			return
		}
		portID, _ := strings.CutSuffix(host, "."+domain)
		port, id, ok := strings.Cut(portID, "-")
		if !ok {
			http.Error(w, "bad preview host", http.StatusBadRequest)
			return
		}
		s.proxy(w, r, port, id)
	})
}

// proxy is the preview proxy (apps/proxy): auth by preview token (or an
// API key as Bearer), 401 otherwise for a non-browser client; every
// forwarded request resets the auto-stop clock unless it carries
// X-Daytona-Skip-Last-Activity-Update: true; the token header is consumed.
// A box that is not started answers 502 [uncertain: the real proxy's
// status for a stopped sandbox was not read].
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, port, id string) {
	s.mu.Lock()
	s.settleLocked()
	b := s.boxes[id]
	if b == nil {
		s.mu.Unlock()
		writeProxyError(w, http.StatusNotFound, "sandbox not found")
		return
	}
	tok := r.Header.Get(PreviewTokenHeader)
	okTok := tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.tokenLocked(b))) == 1
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	okBearer := bearer != "" && s.tokens.Accepts(bearer)
	if !okTok && !okBearer {
		s.mu.Unlock()
		writeProxyError(w, http.StatusUnauthorized, "missing or invalid preview token")
		return
	}
	if b.sb.State != StateStarted {
		s.mu.Unlock()
		writeProxyError(w, http.StatusBadGateway, "sandbox is not running")
		return
	}
	if r.Header.Get(skipActivityHeader) != "true" {
		b.sb.LastActivityAt = s.Clock().Now()
	}
	s.mu.Unlock()
	r.Header.Del(PreviewTokenHeader)
	if okBearer {
		r.Header.Del("Authorization") // a valid Daytona credential is stripped
	}
	if port != "8000" || s.opts.AgentServer == nil {
		if r.URL.Path == "/server_info" && port == "8000" {
			emulator.WriteJSON(w, http.StatusOK, map[string]any{"uptime": 1, "idle_time": 0, "title": "daytona emulator box " + id, "version": "emulated"})
			return
		}
		writeProxyError(w, http.StatusBadGateway, "nothing listens on port "+port)
		return
	}
	s.opts.AgentServer(id).ServeHTTP(w, r)
}

func writeProxyError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"statusCode": status, "message": msg})
}
