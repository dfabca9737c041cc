package main

import (
	"context"
	"net/url"

	"github.com/canvasapp/companion/providers/wasm/modules/internal/api"
	"github.com/canvasapp/companion/providers/wasm/sdk"
)

// Endpoint opens (or finds) the tunnel to the agent-server's port:
// POST /v1/sandbox/{id}/tunnel/8000 → {url}. The host asks only when
// someone reaches the box, never on a timer: the call starts a container
// when the sandbox has none (after a sleep: a fresh one, without the
// agent-server, whose tunnel then answers 502). The tunnel needs no
// headers of its own; companion adds the agent-server's key.
func (provider) Endpoint(ctx context.Context, acct sdk.Account, id string) (sdk.Endpoint, error) {
	if _, err := ours(acct, id); err != nil {
		return sdk.Endpoint{}, err
	}
	if err := bridgeURL(acct); err != nil {
		return sdk.Endpoint{}, err
	}
	var t struct {
		URL      string `json:"url"`
		Hostname string `json:"hostname"`
	}
	if _, err := client().Call(ctx, "POST", "/v1/sandbox/"+api.PathID(id)+"/tunnel/"+agentPort, nil, nil, &t); err != nil {
		return sdk.Endpoint{}, err
	}
	if t.URL == "" && t.Hostname != "" {
		t.URL = "https://" + t.Hostname
	}
	if u, err := url.Parse(t.URL); t.URL == "" || err != nil || u.Host == "" {
		return sdk.Endpoint{}, sdk.Errorf(sdk.Unavailable, "the Cloudflare Sandbox bridge opened a tunnel for sandbox %s without a usable url", id)
	}
	return sdk.Endpoint{URL: t.URL, Headers: map[string]string{}}, nil
}
