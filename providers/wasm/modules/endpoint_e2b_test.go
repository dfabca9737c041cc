package modules_test

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// TestE2BEndpoint: the sandbox is created private with the agent key in
// its env; the module's endpoint is 8000-{id}.{domain} with the traffic
// token only connect answers carry; the emulator's proxy answers with the
// token only; traffic does not move the TTL; a paused box is refused, not
// woken.
func TestE2BEndpoint(t *testing.T) {
	ctx := context.Background()
	d := newE2B(t, map[string]string{"sandbox_hosts": "*.localhost"})
	u, _ := url.Parse(d.acct.Config["api_url"])
	_, port, _ := net.SplitHostPort(u.Host)
	d.eb.SetDomain("localhost:" + port)
	a := d.prov.(core.EndpointReporter)

	b := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Name: "reach me", AgentKey: "agent-key-from-companion"})
	sb, _ := d.eb.Sandbox(b.ID)
	if !sb.Private || sb.EnvVars["OH_SESSION_API_KEYS_0"] != "agent-key-from-companion" {
		t.Fatalf("sandbox private=%v env=%v", sb.Private, sb.EnvVars)
	}
	ep, err := a.Endpoint(ctx, d.acct, b.ID)
	if err != nil {
		t.Fatal(d.check(err))
	}
	if ep.URL != "http://8000-"+b.ID+".localhost:"+port || ep.Headers["E2b-Traffic-Access-Token"] == "" {
		t.Fatalf("endpoint %+v", ep)
	}
	end, _ := d.eb.Sandbox(b.ID)
	d.clock.Advance(time.Minute)
	if _, err := reach(t, ep, true); err != nil {
		t.Fatalf("server_info with the traffic token: %v", err)
	}
	if after, _ := d.eb.Sandbox(b.ID); !after.EndAt.Equal(end.EndAt) {
		t.Errorf("proxied traffic moved the TTL from %v to %v", end.EndAt, after.EndAt)
	}
	if _, err := reach(t, ep, false); err == nil {
		t.Fatal("server_info without the traffic token succeeded")
	}

	d.suspend(d.acct, b.ID)
	_, err = a.Endpoint(ctx, d.acct, b.ID)
	if !core.IsKind(err, core.KindConflict) {
		t.Fatalf("endpoint of a paused sandbox: %v, want conflict", err)
	}
	if sb, _ := d.eb.Sandbox(b.ID); sb.State != "paused" {
		t.Fatalf("asking for the endpoint woke the sandbox: %s", sb.State)
	}
}
