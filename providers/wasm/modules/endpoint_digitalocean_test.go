package modules_test

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/emulators/digitalocean"
)

// TestDigitalOceanEndpoint: the session's ingress URL is reported, the
// host adds the account's DO token toward it (the module never sees it),
// the emulator's ingress answers only with that token, and a pause revokes
// the URL: after resume the session has a new host and the old is gone.
func TestDigitalOceanEndpoint(t *testing.T) {
	ctx := context.Background()
	d := newDO(t, digitalocean.Options{}, map[string]string{"ingress_hosts": "*.localhost"})
	u, _ := url.Parse(d.acct.Config["api_url"])
	_, port, _ := net.SplitHostPort(u.Host)
	d.do.SetIngressDomain("http", "localhost:"+port)
	cfg := d.do.SeedConfig("openhands", "agent: openhands\ntemplate: openhands\nkeep_warm: false\n")
	d.acct.Config["config_id"] = cfg.ConfigID
	a := d.prov.(core.EndpointReporter)

	b := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Name: "reach me"})
	ep, err := a.Endpoint(ctx, d.acct, b.ID)
	if err != nil {
		t.Fatal(d.check(err))
	}
	if !strings.HasPrefix(ep.URL, "http://") || !strings.HasSuffix(ep.URL, ".localhost:"+port) || ep.Headers["Authorization"] != "Bearer "+doToken {
		t.Fatalf("endpoint %s with headers %v", ep.URL, len(ep.Headers))
	}
	if _, err := reach(t, ep, true); err != nil {
		t.Fatalf("server_info with the DO token: %v", err)
	}
	if _, err := reach(t, ep, false); err == nil {
		t.Fatal("server_info without the DO token succeeded")
	}

	d.suspend(d.acct, b.ID)
	if _, err := reach(t, ep, true); err == nil {
		t.Fatal("the ingress URL still answers after a pause")
	}
	d.resume(d.acct, b.ID)
	fresh, err := a.Endpoint(ctx, d.acct, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.URL == ep.URL {
		t.Fatal("the ingress URL did not change across pause and resume")
	}
	if _, err := reach(t, fresh, true); err != nil {
		t.Fatalf("server_info through the new ingress: %v", err)
	}
}
