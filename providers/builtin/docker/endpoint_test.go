package docker_test

import (
	"testing"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker"
	"github.com/canvasapp/companion/providers/wasm"
)

// TestEndpointAndGivenKey: the box runs with the key companion generated
// (spec.AgentKey), its endpoint reaches the agent-server through the
// guarded endpoint client, /api answers with that key only, and a stopped
// box has no endpoint.
func TestEndpointAndGivenKey(t *testing.T) {
	f := newFixture(t, docker.Config{})
	ctx := ctxT(t)
	const key = "companion-made-key-0123456789abcdef"
	box, err := f.p.Create(ctx, f.acct, core.CreateSpec{WorkspaceID: "ws_ep", Name: "ep", AgentKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if box.Key != key {
		t.Fatalf("box key %q, want the one in the spec", box.Key)
	}
	ep, err := f.p.Endpoint(ctx, f.acct, box.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ep.URL != box.URL || len(ep.Headers) != 0 {
		t.Fatalf("endpoint %+v, box URL %s", ep, box.URL)
	}
	f.waitActivity(box.ID) // the agent-server is up
	c, err := agentclient.New(agentclient.Endpoint{URL: ep.URL, SessionKey: key}, wasm.EndpointClient())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ServerInfo(ctx); err != nil {
		t.Fatalf("server_info through the endpoint: %v", err)
	}
	if _, err := c.AllConversations(ctx); err != nil {
		t.Fatalf("conversations with the given key: %v", err)
	}
	wrong, _ := agentclient.New(agentclient.Endpoint{URL: ep.URL, SessionKey: "not-the-key"}, wasm.EndpointClient())
	if _, err := wrong.AllConversations(ctx); err == nil {
		t.Fatal("a wrong key opened /api")
	}
	if _, err := f.p.Suspend(ctx, f.acct, box.ID); err != nil {
		t.Fatal(err)
	}
	_, err = f.p.Endpoint(ctx, f.acct, box.ID)
	wantKind(t, err, core.KindConflict, "endpoint of a stopped box")
}
