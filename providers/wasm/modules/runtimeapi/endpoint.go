package main

import (
	"context"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

// Endpoint is the runtime's url: the agent-server's base URL (§1.8, path
// or subdomain mode). The runtime-api's proxy wants no headers of its
// own; the agent-server wants X-Session-API-Key, which companion adds
// itself (the host refuses it here). The key changes at every resume, so
// the host asks again after each. A paused runtime answers 503 at its
// url: that is paused, not broken, and is reported as a conflict.
func (p provider) Endpoint(ctx context.Context, acct sdk.Account, id string) (sdk.Endpoint, error) {
	r, err := p.get(ctx, acct, id)
	if err != nil {
		return sdk.Endpoint{}, err
	}
	if st := r.state(); st != sdk.Running {
		return sdk.Endpoint{}, sdk.Errorf(sdk.Conflict, "OpenHands runtime %s is %s; its agent-server answers once it is running", id, r.Status)
	}
	if r.URL == "" {
		return sdk.Endpoint{}, sdk.Errorf(sdk.Unavailable, "the OpenHands runtime-api returned no url for runtime %s", id)
	}
	return sdk.Endpoint{URL: r.URL, Headers: map[string]string{}}, nil
}
