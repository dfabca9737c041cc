package modal

import (
	"crypto/subtle"
	"encoding/json"
	"net"
	"net/http"
	"time"
)

// openTunnel listens for sandbox id's tunnel. Modal's tunnels are TLS
// (https://host); the emulator's is plain HTTP on 127.0.0.1, which the
// adapter uses for a local (http://) control plane only.
func (s *Server) openTunnel(id string) (*tunnel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveTunnel(id, w, r) }),
		ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &tunnel{ln: ln, srv: srv}, nil
}

// serveTunnel is the agent-server inside the sandbox as seen through its
// tunnel. Every request is activity (an open tunnel connection keeps a
// Modal sandbox awake); the health routes answer without a key, the rest
// want the sandbox's OH_SESSION_API_KEYS_0.
func (s *Server) serveTunnel(id string, w http.ResponseWriter, r *http.Request) {
	s.st.mu.Lock()
	s.tick()
	sb, ok := s.st.sandboxes[id]
	if !ok || sb.State != StateRunning {
		s.st.mu.Unlock()
		http.Error(w, "sandbox not running", http.StatusBadGateway)
		return
	}
	s.st.tunnelHit[id]++
	sb.LastActivity = s.clock.Now()
	key := sb.Env["OH_SESSION_API_KEYS_0"]
	agent := s.opts.AgentServer
	s.st.mu.Unlock()
	switch r.URL.Path {
	case "/", "/alive", "/health", "/ready", "/server_info":
		// The agent-server's server_details_router: no key (agent-server.md §1).
	default:
		if key != "" && subtle.ConstantTimeCompare([]byte(key), []byte(r.Header.Get("X-Session-API-Key"))) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"detail": "Unauthorized"})
			return
		}
	}
	if agent != nil {
		agent(id).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"sandbox_id": id, "path": r.URL.Path})
}
