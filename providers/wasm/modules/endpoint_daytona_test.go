package modules_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm"
)

func reach(t *testing.T, ep core.Endpoint, withHeaders bool) (agentclient.ServerInfo, error) {
	t.Helper()
	hdr := http.Header{}
	if withHeaders {
		for k, v := range ep.Headers {
			hdr.Set(k, v)
		}
	}
	c, err := agentclient.New(agentclient.Endpoint{URL: ep.URL, Headers: hdr}, wasm.EndpointClient())
	if err != nil {
		t.Fatal(err)
	}
	return c.ServerInfo(context.Background())
}

// TestDaytonaEndpoint: the module asks for the preview URL of port 8000,
// the emulator's preview proxy answers /server_info through it only with
// the preview token, counts the request as activity, and a start from
// stopped makes a new token (the old one is refused).
func TestDaytonaEndpoint(t *testing.T) {
	ctx := context.Background()
	d := newDaytona(t, nil)
	u, _ := url.Parse(d.acct.Config["api_url"])
	_, port, _ := net.SplitHostPort(u.Host)
	d.dt.SetProxy("http", "localhost:"+port)
	d.acct.Config["proxy_hosts"] = "*.localhost"
	a := d.prov.(core.EndpointReporter)

	b := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Name: "reach me", AgentKey: "agent-key-from-companion"})
	if sb, _ := d.dt.Sandbox(b.ID); sb.Env["OH_SESSION_API_KEYS_0"] != "agent-key-from-companion" {
		t.Fatalf("sandbox env %v does not carry the agent key", sb.Env)
	}
	ep, err := a.Endpoint(ctx, d.acct, b.ID)
	if err != nil {
		t.Fatal(d.check(err))
	}
	if ep.URL != "http://8000-"+b.ID+".localhost:"+port || ep.Headers["X-Daytona-Preview-Token"] == "" || ep.Headers["Authorization"] != "" {
		t.Fatalf("endpoint %+v", ep)
	}
	before, _ := d.dt.Sandbox(b.ID)
	d.clock.Advance(time.Minute)
	if _, err := reach(t, ep, true); err != nil {
		t.Fatalf("server_info with the preview token: %v", err)
	}
	if after, _ := d.dt.Sandbox(b.ID); !after.LastActivityAt.After(before.LastActivityAt) {
		t.Errorf("a proxied request did not reset auto-stop (%v → %v)", before.LastActivityAt, after.LastActivityAt)
	}
	if _, err := reach(t, ep, false); err == nil {
		t.Fatal("server_info without the preview token succeeded")
	}

	// Stop and start: the token is regenerated.
	if _, err := d.prov.Suspend(ctx, d.acct, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.prov.Resume(ctx, d.acct, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := reach(t, ep, true); err == nil {
		t.Fatal("the preview token from before the start still works")
	}
	fresh, err := a.Endpoint(ctx, d.acct, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Headers["X-Daytona-Preview-Token"] == ep.Headers["X-Daytona-Preview-Token"] {
		t.Fatal("the token did not change across a start")
	}
	if _, err := reach(t, fresh, true); err != nil {
		t.Fatalf("server_info with the fresh token: %v", err)
	}

	// Without the account's proxy override, the emulator's loopback URL is
	// outside the manifest's hosts and refused by name.
	delete(d.acct.Config, "proxy_hosts")
	_, err = a.Endpoint(ctx, d.acct, b.ID)
	if !errors.Is(err, wasm.ErrEndpointHost) {
		t.Fatalf("loopback preview URL without the override: %v", err)
	}
}
