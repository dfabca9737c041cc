package wasm

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
)

// proxyServer stands in for a provider's box proxy: it answers
// /server_info only with the preview token and the account's bearer.
func proxyServer(t *testing.T, token string) (port string, hits *int) {
	t.Helper()
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		box, _, _ := strings.Cut(r.Host, ".")
		if r.Header.Get("X-Preview-Token") != "preview-"+strings.TrimPrefix(box, "8000-") || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "missing or wrong proxy token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"uptime":5,"idle_time":42,"title":"emu"}`))
	}))
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return port, &n
}

func TestEndpointThroughGuardedClient(t *testing.T) {
	e := newEnv(t)
	a := e.load(t, reachWasm)
	e.setCred(t, "acct_ep", "token", "tok-secret-123")
	port, hits := proxyServer(t, "tok-secret-123")
	acct := core.Account{ID: "acct_ep", Provider: "reach", Config: map[string]string{
		"proxy_hosts": "*.localhost",
		"answer":      "http://8000-{id}.localhost:" + port,
	}}
	ctx := context.Background()
	ep, err := a.Endpoint(ctx, acct, "box1")
	if err != nil {
		t.Fatal(err)
	}
	if ep.URL != "http://8000-box1.localhost:"+port || ep.Headers["X-Preview-Token"] != "preview-box1" || ep.Headers["Authorization"] != "Bearer tok-secret-123" {
		t.Fatalf("endpoint %+v", ep)
	}
	hdr := http.Header{}
	for k, v := range ep.Headers {
		hdr.Set(k, v)
	}
	c, err := agentclient.New(agentclient.Endpoint{URL: ep.URL, Headers: hdr, SessionKey: "k"}, EndpointClient())
	if err != nil {
		t.Fatal(err)
	}
	si, err := c.ServerInfo(ctx)
	if err != nil || si.IdleTime != 42 {
		t.Fatalf("server_info through the endpoint: %+v, %v", si, err)
	}
	// Without the proxy's headers the same URL is refused.
	bare, _ := agentclient.New(agentclient.Endpoint{URL: ep.URL}, EndpointClient())
	if _, err := bare.ServerInfo(ctx); err == nil {
		t.Fatal("server_info without the proxy headers succeeded")
	}
	if *hits != 2 {
		t.Fatalf("proxy saw %d requests, want 2", *hits)
	}
}

func TestEndpointOutsideDeclaredHostsRefused(t *testing.T) {
	e := newEnv(t)
	a := e.load(t, reachWasm)
	ctx := context.Background()
	for _, answer := range []string{
		"https://8000-{id}.evil.example", // not under the manifest's pattern
		"https://8000-{id}.proxy.reach.example.evil.example",
		"http://8000-{id}.proxy.reach.example", // matches, but plain http off loopback
		"http://8000-{id}.localhost:1",         // loopback without the account's override
	} {
		acct := core.Account{ID: "acct_ep", Provider: "reach", Config: map[string]string{"answer": answer}}
		_, err := a.Endpoint(ctx, acct, "box1")
		mustKind(t, err, core.KindInternal, "agent-server URL")
		if strings.HasPrefix(answer, "https") && !errors.Is(err, ErrEndpointHost) {
			t.Errorf("%s: %v does not wrap ErrEndpointHost", answer, err)
		}
	}
	// The manifest's own pattern is accepted as is.
	e.setCred(t, "acct_decl", "token", "tok-secret-789")
	acct := core.Account{ID: "acct_decl", Provider: "reach", Config: map[string]string{}}
	ep, err := a.Endpoint(ctx, acct, "box1")
	if err != nil || ep.URL != "https://8000-box1.proxy.reach.example" {
		t.Fatalf("declared host: %+v, %v", ep.URL, err)
	}
}

func TestEndpointPrivateAddressRefused(t *testing.T) {
	e := newEnv(t)
	a := e.load(t, reachWasm)
	e.setCred(t, "acct_priv", "token", "tok-secret-456")
	acct := core.Account{ID: "acct_priv", Provider: "reach", Config: map[string]string{
		"proxy_hosts": "10.255.255.1",
		"answer":      "https://10.255.255.1:8443",
	}}
	ep, err := a.Endpoint(context.Background(), acct, "box1")
	if err != nil {
		t.Fatal(err) // the pattern allows it; the dialer must not
	}
	c, _ := agentclient.New(agentclient.Endpoint{URL: ep.URL}, EndpointClient())
	_, err = c.ServerInfo(context.Background())
	var blocked *hostcall.BlockedAddrError
	if !errors.As(err, &blocked) {
		t.Fatalf("private endpoint: got %v, want a BlockedAddrError", err)
	}
}

func TestEndpointABIv1ModuleWithoutOp(t *testing.T) {
	e := newEnv(t)
	a := e.load(t, watModule(t, "static_list", nil))
	ctx := context.Background()
	acct := core.Account{ID: "acct_wat", Config: map[string]string{}}
	if _, err := a.List(ctx, acct); err != nil {
		t.Fatalf("list on a module without companion_endpoint: %v", err)
	}
	_, err := a.Endpoint(ctx, acct, "b1")
	mustKind(t, err, core.KindInvalid, "does not implement endpoint")
}

// The endpoint rule is part of what a person is shown before installing.
func TestEndpointRuleInSummary(t *testing.T) {
	mjson, err := manifest.Extract(reachWasm)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse(mjson)
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(m, strings.Repeat("0", 64), false)
	if s.Endpoint == nil || s.Endpoint.Hosts[0] != "*.proxy.reach.example" || s.Endpoint.OverrideField != "proxy_hosts" || s.Endpoint.Credentials[0] != "token" {
		t.Fatalf("summary endpoint %+v", s.Endpoint)
	}
	if txt := s.String(); !strings.Contains(txt, "Reports agent-server URLs under *.proxy.reach.example only (or the account's own proxy_hosts); sends credential token there") {
		t.Fatalf("inspect text lacks the endpoint rule:\n%s", txt)
	}
	if s.Endpoint.SessionKey != "" || strings.Contains(s.String(), "issues the agent-server keys") {
		t.Fatalf("a module without endpoint.session_key is summarized as issuing keys: %+v", s.Endpoint)
	}
	m.Endpoint.SessionKey = manifest.SessionKeyProvider
	s = summarize(m, strings.Repeat("0", 64), false)
	if s.Endpoint.SessionKey != "provider" || !strings.Contains(s.String(), "; the provider issues the agent-server keys (they change on resume)") {
		t.Fatalf("summary of a provider-issued key: %+v\n%s", s.Endpoint, s.String())
	}
}

// A module may not set transport headers or the agent-server key.
func TestEndpointHeadersRefused(t *testing.T) {
	e := newEnv(t)
	a := e.load(t, reachWasm)
	for _, h := range []string{"X-Session-API-Key", "Host", "Proxy-Authorization", "Cookie"} {
		acct := core.Account{ID: "acct_ep", Provider: "reach", Config: map[string]string{"header": h}}
		_, err := a.Endpoint(context.Background(), acct, "box1")
		mustKind(t, err, core.KindInternal, "agent-server header")
	}
}
