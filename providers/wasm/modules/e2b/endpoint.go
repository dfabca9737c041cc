package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/canvasapp/companion/providers/wasm/modules/internal/api"
	"github.com/canvasapp/companion/providers/wasm/sdk"
)

// defaultDomain is E2B Cloud's sandbox domain (E2B_DOMAIN's default).
const defaultDomain = "e2b.app"

// Endpoint computes the agent-server's host, 8000-{id}.{domain}, and gets
// the traffic token the proxy wants for a private sandbox. Only create and
// connect answers carry that token, and the module keeps nothing between
// calls, so it connects (which, on a running sandbox, only extends its
// TTL). A paused sandbox is refused rather than connected: connect would
// resume it, and a read must not wake a box.
func (p provider) Endpoint(ctx context.Context, _ sdk.Account, id string) (sdk.Endpoint, error) {
	s, err := p.get(ctx, id)
	if err != nil {
		return sdk.Endpoint{}, err
	}
	if st := state(s.State); st != sdk.Running {
		return sdk.Endpoint{}, sdk.Errorf(sdk.Conflict, "E2B sandbox %s is %s; its agent-server is reachable only while it runs", id, st)
	}
	timeout, err := strconv.ParseInt(s.Metadata[metaTimeout], 10, 64)
	if err != nil || timeout <= 0 {
		timeout = defaultTimeout
	}
	body := struct {
		Timeout int64 `json:"timeout"`
	}{timeout}
	var c struct {
		SandboxID          string  `json:"sandboxID"`
		Domain             *string `json:"domain"`
		TrafficAccessToken string  `json:"trafficAccessToken"`
	}
	if _, err := client.Call(ctx, "POST", "/sandboxes/"+api.PathID(id)+"/connect", nil, body, &c); err != nil {
		return sdk.Endpoint{}, api.NotFound(err, "E2B sandbox", id)
	}
	domain := defaultDomain
	if c.Domain != nil && *c.Domain != "" {
		domain = strings.ToLower(*c.Domain)
	}
	scheme := "https"
	if h := strings.Split(domain, ":")[0]; h == "localhost" || strings.HasSuffix(h, ".localhost") || strings.HasPrefix(h, "127.") {
		scheme = "http" // a local E2B or the emulator; the host allows it only by account override
	}
	ep := sdk.Endpoint{URL: scheme + "://8000-" + id + "." + domain, Headers: map[string]string{}}
	if c.TrafficAccessToken != "" {
		ep.Headers["e2b-traffic-access-token"] = c.TrafficAccessToken
	}
	return ep, nil
}
