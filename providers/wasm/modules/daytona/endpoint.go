package main

import (
	"context"

	"github.com/canvasapp/companion/providers/wasm/modules/internal/api"
	"github.com/canvasapp/companion/providers/wasm/sdk"
)

// agentPort is where the OpenHands agent-server listens in the box.
const agentPort = "8000"

// Endpoint asks Daytona for the agent-server port's standard preview URL
// and its token (GET /sandbox/{id}/ports/8000/preview-url). The token is
// regenerated at every start from stopped, so the host asks again after
// each resume rather than keeping it. It goes in X-Daytona-Preview-Token,
// which the proxy consumes; the API key is not sent to the proxy.
func (provider) Endpoint(ctx context.Context, acct sdk.Account, id string) (sdk.Endpoint, error) {
	if err := api.CheckID(id); err != nil {
		return sdk.Endpoint{}, err
	}
	var pv struct {
		SandboxID string `json:"sandboxId"`
		URL       string `json:"url"`
		Token     string `json:"token"`
	}
	if _, err := client(acct).Call(ctx, "GET", "/sandbox/"+api.PathID(id)+"/ports/"+agentPort+"/preview-url", nil, nil, &pv); err != nil {
		return sdk.Endpoint{}, api.NotFound(err, "Daytona sandbox", id)
	}
	if pv.URL == "" {
		return sdk.Endpoint{}, sdk.Errorf(sdk.Unavailable, "Daytona returned no preview URL for sandbox %s", id)
	}
	ep := sdk.Endpoint{URL: pv.URL, Headers: map[string]string{}}
	if pv.Token != "" {
		ep.Headers["X-Daytona-Preview-Token"] = pv.Token
	}
	return ep, nil
}
