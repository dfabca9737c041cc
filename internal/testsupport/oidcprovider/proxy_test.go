package oidcprovider

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// upstream records the identity headers of what reaches it.
type upstream struct {
	mu   sync.Mutex
	seen []http.Header
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.seen = append(u.seen, r.Header.Clone())
	u.mu.Unlock()
	_, _ = w.Write([]byte("upstream ok"))
}

func (u *upstream) requests() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.seen...)
}

// oauth2-proxy in front of an upstream, as it will stand in front of
// `companion serve --auth proxy --user-header X-Forwarded-User`: without a
// login nothing reaches the upstream; after a real login round trip at the
// provider, requests arrive with the provider's subject and email in the
// user headers, and a header the browser sends itself is replaced.
func TestOAuth2ProxyForwardsTheSignedInUser(t *testing.T) {
	up := &upstream{}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	port := FreePort(t)
	prov := Start(t, Options{RedirectURIs: []string{ProxyRedirectURL(port)}})
	proxy := StartOAuth2Proxy(t, ProxyOptions{Provider: prov, Upstream: upSrv.URL, Port: port})

	b := NewBrowser(t)
	req, _ := http.NewRequest(http.MethodGet, proxy.URL+"/v1/workspaces", nil)
	req.Header.Set("Accept", "text/html")
	req.Header.Set("X-Forwarded-User", "spoofed-admin")
	resp, _ := do(t, b, req)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("without a login: %s, want 302 to sign in", resp.Status)
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("%d requests reached the upstream without a login", n)
	}

	user := prov.DemoUser()
	cb := prov.Authorize(t, b, proxy.URL+"/v1/workspaces", user)
	if !strings.HasPrefix(cb.String(), ProxyRedirectURL(port)) {
		t.Fatalf("the provider sent the browser to %s, not the proxy's callback", cb)
	}
	resp, body := Follow(t, b, cb.String())
	if resp.StatusCode != http.StatusOK || body != "upstream ok" || resp.Request.URL.Path != "/v1/workspaces" {
		t.Fatalf("after login: %s at %s: %.300s", resp.Status, resp.Request.URL.Redacted(), body)
	}

	req, _ = http.NewRequest(http.MethodGet, proxy.URL+"/v1/me", nil)
	req.Header.Set("X-Forwarded-User", "spoofed-admin")
	req.Header.Set("X-Forwarded-Email", "admin@evil.example")
	if resp, body := do(t, b, req); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed-in request: %s %s", resp.Status, body)
	}
	seen := up.requests()
	if len(seen) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(seen))
	}
	for _, h := range seen {
		if got := h.Values("X-Forwarded-User"); len(got) != 1 || got[0] != user.ID {
			t.Errorf("X-Forwarded-User %q, want only the subject %q", got, user.ID)
		}
		if got := h.Values("X-Forwarded-Email"); len(got) != 1 || got[0] != user.Email {
			t.Errorf("X-Forwarded-Email %q, want %q", got, user.Email)
		}
	}
}
