package docker

import (
	"context"

	"github.com/canvasapp/companion/core"
)

var _ core.EndpointReporter = (*Provider)(nil)

// Endpoint implements core.EndpointReporter: the agent-server's port the
// engine published on 127.0.0.1. Docker has no proxy, so no extra headers;
// the session key is the only guard. A box that is not running has no
// published port and answers KindConflict.
func (p *Provider) Endpoint(ctx context.Context, acct core.Account, boxID string) (core.Endpoint, error) {
	b, err := p.Get(ctx, acct, boxID)
	if err != nil {
		return core.Endpoint{}, err
	}
	if b.URL == "" {
		return core.Endpoint{}, &core.Error{Kind: core.KindConflict, State: b.State,
			Message: "docker box " + shortID(boxID) + " is not running, so its agent-server has no published port"}
	}
	return core.Endpoint{URL: b.URL, Headers: map[string]string{}}, nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
