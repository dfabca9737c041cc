package daytona

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

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
			"url":       s.previewURLLocked(b, port),
			"token":     s.tokenLocked(b),
		})
	})
}

func (s *Server) previewURLLocked(b *box, port int) string {
	return s.proxyProtocol + "://" + strconv.Itoa(port) + "-" + b.sb.ID + "." + s.proxyDomain
}

// Endpoint is what GET .../ports/{port}/preview-url tells a client, for
// tests and the admin route: the preview URL and the token header. It does
// not go through the API, so it is neither logged nor faulted.
func (s *Server) Endpoint(idOrName string, port int) (emulator.Endpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	b := s.lookupLocked(idOrName)
	switch {
	case b == nil:
		return emulator.Endpoint{}, fmt.Errorf("daytona: no sandbox %q", idOrName)
	case s.proxyDomain == "":
		return emulator.Endpoint{}, errors.New("daytona: no proxy domain (SetProxy)")
	case port < 1 || port > 65535:
		return emulator.Endpoint{}, fmt.Errorf("daytona: port %d out of range", port)
	}
	return emulator.Endpoint{URL: s.previewURLLocked(b, port), Headers: map[string]string{PreviewTokenHeader: s.tokenLocked(b)}}, nil
}

// tokenLocked is the sandbox's authToken, nanoid(32) as start() makes it
// (sandbox.service.ts); made on first use.
func (s *Server) tokenLocked(b *box) string {
	if b.previewToken == "" {
		b.previewToken = emulator.RandomString(32, nanoidAlphabet)
	}
	return b.previewToken
}

// nanoidAlphabet is nanoid's default URL-safe alphabet.
const nanoidAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

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
// API key as Bearer), 401 otherwise for a non-browser client; the token
// header is consumed. Every forwarded request resets the auto-stop clock,
// and keeps resetting it every 50 s while it stays open (a long download,
// an SSE stream, a WebSocket), unless it carries
// X-Daytona-Skip-Last-Activity-Update: true (get_sandbox_target.go
// updateLastActivity). A box that is not started answers 502 [uncertain:
// the real proxy's status for a stopped sandbox was not read].
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
		done := s.openLocked(b)
		defer done()
	}
	s.mu.Unlock()
	r.Header.Del(PreviewTokenHeader)
	if okBearer {
		r.Header.Del("Authorization") // a valid Daytona credential is stripped
	}
	if port == "8000" && s.opts.AgentServer != nil {
		s.opts.AgentServer(id).ServeHTTP(w, r)
		return
	}
	if port == "8000" && r.URL.Path == "/server_info" {
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"uptime": 1, "idle_time": 0, "title": "daytona emulator box " + id, "version": "emulated"})
		return
	}
	writeProxyError(w, http.StatusBadGateway, "nothing listens on port "+port)
}

// activityEvery is how often the proxy refreshes a sandbox's activity
// while a request through it stays open (get_sandbox_target.go).
const activityEvery = 50 * time.Second

// openLocked records activity now for a request entering the proxy and
// keeps it open until the returned func runs: settleLocked refreshes
// lastActivityAt at every activityEvery tick in between, so a box with an
// open request is never auto-stopped (its interval is at least a minute,
// longer than a tick).
func (s *Server) openLocked(b *box) (done func()) {
	now := s.Clock().Now()
	b.sb.LastActivityAt = now
	s.connSeq++
	n := s.connSeq
	if b.open == nil {
		b.open = map[uint64]time.Time{}
	}
	b.open[n] = now
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.settleLocked()
		delete(b.open, n)
	}
}

// refreshOpen moves lastActivityAt of a started box to the newest 50 s
// tick at or before now of each request still open through the proxy.
func (s *Server) refreshOpen(b *box, now time.Time) {
	if b.sb.State != StateStarted {
		return
	}
	for _, since := range b.open {
		tick := since.Add(now.Sub(since) / activityEvery * activityEvery)
		if tick.After(b.sb.LastActivityAt) {
			b.sb.LastActivityAt = tick
		}
	}
}

func writeProxyError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"statusCode": status, "message": msg})
}
