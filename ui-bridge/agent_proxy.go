package uibridge

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/agentproxy"
)

// The agent, through companion: POST /v1/workspaces/{id}/connect wakes a
// workspace and waits for its agent-server; /v1/workspaces/{id}/agent/…
// forwards any method, and WebSocket handshakes, to it (package
// agentproxy). The gate has authenticated the caller and checked Host and
// Origin, as for every route; the proxy scopes by owner through core.

// newAgentProxy builds the proxy over cfg.AgentHTTP's transport and dialer
// (the endpoint guard).
func (s *Server) newAgentProxy() *agentproxy.Proxy {
	hc := s.cfg.AgentHTTP
	if hc == nil {
		hc = &http.Client{}
	}
	tr, _ := hc.Transport.(*http.Transport)
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport)
	}
	var cookies []string
	if s.cfg.Login != nil {
		cookies = []string{s.cfg.Login.CookieName()}
	}
	return agentproxy.New(agentproxy.Config{
		Target:            s.svc.AgentTarget,
		Transport:         tr,
		DialContext:       tr.DialContext,
		WriteError:        s.writeProxyError,
		MaxConnsPerOwner:  s.cfg.AgentConns,
		MaxBody:           s.cfg.AgentMaxBody,
		OwnCookies:        cookies,
		OwnSubprotocol:    func(p string) bool { return p == Subprotocol || strings.HasPrefix(p, BearerSubprotocolPrefix) },
		AnswerSubprotocol: Subprotocol,
		Counts: func(owner, id string, n int) {
			s.svc.NoteAgentConnections(id, n)
			s.agentCounts.set(owner, id, n)
		},
		Log: s.log,
	})
}

// proxyAgent is /v1/workspaces/{id}/agent/{rest...}, any method.
func (s *Server) proxyAgent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	// The path below the agent-server's root, as the caller escaped it.
	marker := "/workspaces/" + url.PathEscape(id) + "/agent"
	p := r.URL.EscapedPath()
	i := strings.Index(p, marker)
	if i < 0 {
		writeErrorCode(w, http.StatusNotFound, codeRouteNotFound, "no such route: "+r.Method+" "+r.URL.Path)
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		// A body that keeps arriving is not cut by --body-timeout; one
		// that stalls for that long is.
		r.Body = &slidingBody{ReadCloser: r.Body, rc: http.NewResponseController(w), d: s.cfg.BodyTimeout}
	}
	s.agents.Serve(w, r, owner(r), id, p[i+len(marker):])
}

// slidingBody moves the body's read deadline on with every read.
type slidingBody struct {
	io.ReadCloser
	rc *http.ResponseController
	d  time.Duration
}

func (b *slidingBody) Read(p []byte) (int, error) {
	if b.d > 0 {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	}
	return b.ReadCloser.Read(p)
}

// writeProxyError answers the proxy's refusals in the API's shape.
func (s *Server) writeProxyError(w http.ResponseWriter, r *http.Request, err error) {
	var big *agentproxy.BodyTooLargeError
	if errors.As(err, &big) {
		writeErrorCode(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, big.Error())
		return
	}
	s.writeError(w, r, err)
}

// connect is POST /v1/workspaces/{id}/connect.
func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	if !s.decodeBody(w, r, &emptyBody{}, true) {
		return
	}
	res, err := s.svc.Connect(r.Context(), owner(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"connect": map[string]any{
		"workspace":  toWireWorkspace(res.Workspace),
		"woke":       res.Woke,
		"agent_path": "/v1/workspaces/" + url.PathEscape(res.Workspace.ID) + "/agent",
	}})
}

// agentCountEvery coalesces changes of a workspace's agent connections:
// a page's burst of requests makes one stream message, not one per
// request.
const agentCountEvery = 500 * time.Millisecond

// agentCounts keeps each workspace's open agent connections and sends
// changes to the owner's stream clients as "agent" messages.
type agentCounts struct {
	mu    sync.Mutex
	n     map[string]agentCount // open connections, by workspace
	dirty map[string]string     // workspace → owner, changed since the last send
	timer *time.Timer
	flush func(owner, id string, n int)
}

type agentCount struct {
	owner string
	n     int
}

// set records a count (the proxy calls it on every change).
func (a *agentCounts) set(owner, id string, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n, a.dirty = map[string]agentCount{}, map[string]string{}
	}
	if n == 0 {
		delete(a.n, id)
	} else {
		a.n[id] = agentCount{owner, n}
	}
	a.dirty[id] = owner
	if a.timer == nil && a.flush != nil {
		a.timer = time.AfterFunc(agentCountEvery, a.send)
	}
}

// send flushes the changed counts.
func (a *agentCounts) send() {
	type change struct {
		owner, id string
		n         int
	}
	a.mu.Lock()
	list := make([]change, 0, len(a.dirty))
	for id, owner := range a.dirty {
		list = append(list, change{owner, id, a.n[id].n})
	}
	clear(a.dirty)
	a.timer = nil
	a.mu.Unlock()
	for _, c := range list {
		a.flush(c.owner, c.id, c.n)
	}
}

// of returns owner's open counts.
func (a *agentCounts) of(owner string) map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for id, c := range a.n {
		if c.owner == owner {
			out[id] = c.n
		}
	}
	return out
}

// agentFrame is the stream's "agent" message.
func agentFrame(now time.Time, id string, n int) []byte {
	b, err := json.Marshal(struct {
		Type        string    `json:"type"`
		ServerTime  time.Time `json:"server_time"`
		ID          string    `json:"id"`
		Connections int       `json:"connections"`
	}{"agent", wireTime(now), id, n})
	if err != nil {
		panic("uibridge: encoding an agent message: " + err.Error())
	}
	return b
}
