package cloudflare

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// openTunnel is POST /v1/sandbox/:id/tunnel/:port: {id, port, url,
// hostname, name, createdAt}. With no name the tunnel is an ephemeral
// *.trycloudflare.com one. A port that already has a tunnel in this
// container gets it again [uncertain: the reference does not say].
func (s *Server) openTunnel(w http.ResponseWriter, r *http.Request, c *Container) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		fail(w, http.StatusBadRequest, "port must be 1-65535", "invalid_request")
		return
	}
	var body struct {
		Name string `json:"name"`
	}
	if err := emulator.DecodeJSON(r, &body); err != nil && err != emulator.ErrEmptyBody {
		fail(w, http.StatusBadRequest, "Invalid JSON body: "+err.Error(), "invalid_request")
		return
	}
	if body.Name != "" {
		// Named tunnels need CLOUDFLARE_API_TOKEN on the Worker, which
		// the emulated one lacks.
		fail(w, http.StatusBadRequest, "Named tunnels need CLOUDFLARE_API_TOKEN", "tunnel_error")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.containers[c.SandboxID]
	if cur == nil || cur.ID != c.ID {
		fail(w, http.StatusBadGateway, "container stopped", "tunnel_error")
		return
	}
	t, ok := cur.Tunnels[port]
	if !ok {
		tid := emulator.RandomString(16, emulator.LowerAlnum)
		t = Tunnel{ID: tid, Port: port, CreatedAt: s.Clock().Now()}
		if s.domain != "" {
			t.Hostname = tid + "." + s.domain
			t.URL = "http://" + t.Hostname
		} else {
			t.Hostname = tid + ".trycloudflare.com"
			t.URL = "https://" + t.Hostname
		}
		cur.Tunnels[port] = t
		s.tunnels[strings.ToLower(t.Hostname)] = c.SandboxID
	}
	emulator.WriteJSON(w, http.StatusOK, t)
}

// closeTunnel is DELETE /v1/sandbox/:id/tunnel/:port: 204.
func (s *Server) closeTunnel(w http.ResponseWriter, r *http.Request, c *Container) {
	port, _ := strconv.Atoi(r.PathValue("port"))
	s.mu.Lock()
	if cur := s.containers[c.SandboxID]; cur != nil && cur.ID == c.ID {
		if t, ok := cur.Tunnels[port]; ok {
			delete(s.tunnels, strings.ToLower(t.Hostname))
			delete(cur.Tunnels, port)
		}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// serveTunnel answers a request addressed to a tunnel's hostname: the
// container must still be the one the tunnel was opened in (a slept one's
// tunnels are gone), traffic counts as activity, and port 8000 reaches the
// agent-server once it was started; otherwise 502, as cloudflared answers
// when nothing listens.
func (s *Server) serveTunnel(w http.ResponseWriter, r *http.Request) bool {
	host := strings.ToLower(r.Host)
	s.mu.Lock()
	id, ok := s.tunnels[host]
	if !ok {
		s.mu.Unlock()
		return false
	}
	s.settleLocked(id)
	c := s.containers[id]
	var port int
	var agent bool
	var cid string
	if c != nil {
		for p, t := range c.Tunnels {
			if strings.EqualFold(t.Hostname, host) {
				port = p
			}
		}
	}
	if c != nil && port != 0 {
		s.touchLocked(id)
		agent, cid = c.Agent, c.ID
	}
	s.mu.Unlock()
	switch {
	case c == nil || port == 0:
		http.Error(w, "error code: 1033 (Argo Tunnel error: the tunnel is gone)", http.StatusBadGateway)
	case port != 8000 || !agent:
		http.Error(w, "error code: 502 (nothing listens on port "+strconv.Itoa(port)+")", http.StatusBadGateway)
	case s.opts.AgentServer == nil:
		emulator.WriteJSON(w, http.StatusOK, map[string]any{"uptime": 1, "idle_time": 0, "title": "cloudflare emulator " + cid})
	default:
		s.opts.AgentServer(cid).ServeHTTP(w, r)
	}
	return true
}

// Endpoint is the agent-server's tunnel of sandbox id as a client would
// learn it, read from the state: not logged, not activity, nothing made.
func (s *Server) Endpoint(id string) (emulator.Endpoint, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked(id)
	c := s.containers[id]
	if c == nil {
		return emulator.Endpoint{}, false
	}
	t, ok := c.Tunnels[8000]
	return emulator.Endpoint{URL: t.URL, Headers: map[string]string{}}, ok
}

// Seed gives sandbox id a running container with its agent-server
// started (key key) and a tunnel to port 8000, as a create and an
// endpoint call would; it is not logged and returns the container.
func (s *Server) Seed(id, key string) (Container, error) {
	if !idRE.MatchString(id) {
		return Container{}, fmt.Errorf("cloudflare: sandbox id %q does not match %s", id, idRE)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.assignLocked(id)
	if !ok {
		return Container{}, fmt.Errorf("cloudflare: no container capacity")
	}
	c.Agent, c.AgentKey = true, key
	if _, ok := c.Tunnels[8000]; !ok {
		tid := emulator.RandomString(16, emulator.LowerAlnum)
		t := Tunnel{ID: tid, Port: 8000, CreatedAt: s.Clock().Now(), Hostname: tid + ".trycloudflare.com"}
		if s.domain != "" {
			t.Hostname = tid + "." + s.domain
			t.URL = "http://" + t.Hostname
		} else {
			t.URL = "https://" + t.Hostname
		}
		c.Tunnels[8000] = t
		s.tunnels[strings.ToLower(t.Hostname)] = id
	}
	return *c, nil
}

func (s *Server) adminRoutes() http.Handler {
	a := s.AdminMux()
	a.Handle("GET "+emulator.AdminPrefix+"state", "every live container by sandbox id", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.settleAllLocked()
		out := map[string]Container{}
		for id, c := range s.containers {
			out[id] = *c
		}
		s.mu.Unlock()
		emulator.WriteJSON(w, http.StatusOK, out)
	})
	return a
}
