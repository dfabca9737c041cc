package agentproxy

import (
	"context"
	"net/http"
	"time"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
)

// Probe is core's AgentProbe: GET /ready on a box's agent-server (no
// auth, not activity), through the provider's proxy.
type Probe struct {
	// HTTP is the guarded client for boxes.
	HTTP *http.Client
}

var _ core.AgentProbe = Probe{}

// Ready reports whether the agent-server answered /ready with 200.
func (pr Probe) Ready(ctx context.Context, acc core.AgentAccess) (bool, error) {
	c, err := pr.client(acc)
	if err != nil {
		return false, err
	}
	return c.Ready(ctx)
}

// Idle is the agent-server's idle time (GET /server_info, not activity).
func (pr Probe) Idle(ctx context.Context, acc core.AgentAccess) (time.Duration, error) {
	c, err := pr.client(acc)
	if err != nil {
		return 0, err
	}
	si, err := c.ServerInfo(ctx)
	if err != nil {
		return 0, err
	}
	return si.Idle(), nil
}

func (pr Probe) client(acc core.AgentAccess) (*agentclient.Client, error) {
	h := http.Header{}
	for k, v := range acc.Endpoint.Headers {
		h.Set(k, v)
	}
	return agentclient.New(agentclient.Endpoint{URL: acc.Endpoint.URL, Headers: h, SessionKey: acc.Key}, pr.HTTP)
}
