package main

import (
	"context"

	"github.com/canvasapp/companion/providers/wasm/modules/internal/api"
	"github.com/canvasapp/companion/providers/wasm/sdk"
)

// ingressPaths are the session ingress route under its two names: pydo
// ≤0.46 and DoTs say /v2/agents/...; pydo 0.47 renamed it to
// /v2/harness-runtime/... (box-endpoints.md §3b). The first that knows the
// session answers.
var ingressPaths = []string{"/v2/agents/sessions/", "/v2/harness-runtime/sessions/"}

// Endpoint reads the session's ingress URL, which fronts guest port 8000
// (the agent-server). The URL is revoked by a pause and changes after a
// resume, so the host asks again each time. The DO token it needs is
// attached by the host (manifest endpoint.credentials), not returned here.
func (provider) Endpoint(ctx context.Context, _ sdk.Account, id string) (sdk.Endpoint, error) {
	if err := api.CheckID(id); err != nil {
		return sdk.Endpoint{}, err
	}
	var out struct {
		IngressURL struct {
			URL   string `json:"url"`
			State string `json:"state"`
		} `json:"ingress_url"`
	}
	var err error
	for _, p := range ingressPaths {
		if _, err = client.Call(ctx, "GET", p+api.PathID(id)+"/ingress", nil, nil, &out); !api.IsKind(err, sdk.NotFound) {
			break
		}
	}
	if err != nil {
		return sdk.Endpoint{}, api.NotFound(err, "DigitalOcean session", id)
	}
	if out.IngressURL.State != "INGRESS_URL_STATE_READY" || out.IngressURL.URL == "" {
		return sdk.Endpoint{}, sdk.Errorf(sdk.Unavailable, "the ingress URL of DigitalOcean session %s is not ready yet (%s)", id, out.IngressURL.State)
	}
	return sdk.Endpoint{URL: out.IngressURL.URL, Headers: map[string]string{}}, nil
}
