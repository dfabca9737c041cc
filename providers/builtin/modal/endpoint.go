package modal

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
	modalsdk "github.com/modal-labs/modal-client/go"
)

// withURL sets a running box's URL from its tunnel: a control-plane call
// (SandboxGetTunnels), no connection to the box. The URL is what people
// see; companion reaches the box through Endpoint. A tunnel not known yet
// leaves it empty.
func (p *Provider) withURL(ctx context.Context, c *client, b *core.Box, sb *modalsdk.Sandbox) {
	if b.State != core.StateRunning {
		return
	}
	if u, err := p.tunnelURL(ctx, c, sb, 10*time.Second); err == nil {
		b.URL = u
	}
}

// Endpoint implements core.EndpointReporter with one control-plane call
// (SandboxGetTunnels); it opens no connection through the tunnel. Core
// connects to the URL only for a person's action: a connection keeps a
// Modal sandbox awake (DESIGN.md rule 2).
func (p *Provider) Endpoint(ctx context.Context, acct core.Account, id string) (core.Endpoint, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := p.clientFor(ctx, acct)
	if err != nil {
		return core.Endpoint{}, err
	}
	f, err := p.inspect(ctx, c, acct, id)
	if err != nil {
		return core.Endpoint{}, err
	}
	if !f.running {
		return core.Endpoint{}, core.Errorf(core.KindConflict, "box %s is not running at Modal (paused or ended): resume it first", id)
	}
	u, err := p.tunnelURL(ctx, c, f.sb, 30*time.Second)
	if err != nil {
		return core.Endpoint{}, err
	}
	return core.Endpoint{URL: u}, nil
}

// tunnelURL asks the control plane for sb's tunnel to the agent-server's
// port and checks what it says.
func (p *Provider) tunnelURL(ctx context.Context, c *client, sb *modalsdk.Sandbox, wait time.Duration) (string, error) {
	id := sb.SandboxID
	tunnels, err := sb.Tunnels(ctx, wait, nil)
	if err != nil {
		return "", wrap(err, "find the tunnel of", id, c.secret)
	}
	t, ok := tunnels[agentPort]
	if !ok || t.Host == "" || t.Port <= 0 || t.Port > 65535 || strings.ContainsAny(t.Host, "/?#@ ") {
		return "", core.Errorf(core.KindUnavailable, "Modal reported no usable tunnel to port %d of box %s", agentPort, id)
	}
	if c.local {
		// An emulator's tunnels are plain HTTP on loopback.
		return "http://" + net.JoinHostPort(t.Host, strconv.Itoa(t.Port)), nil
	}
	return t.URL(), nil
}
