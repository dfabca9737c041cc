package oidcprovider

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// ProxyOptions configure oauth2-proxy in front of an upstream.
type ProxyOptions struct {
	// Provider is the OpenID provider it signs people in against; its
	// RedirectURIs must include ProxyRedirectURL(Port).
	Provider *Provider
	// Upstream is the URL requests go to once signed in (for companion:
	// `companion serve --auth proxy`'s URL).
	Upstream string
	// Port to listen on (127.0.0.1); 0 picks a free one.
	Port int
	// Args are added to the command line (e.g. --email-domain=example.com).
	Args []string
}

// Proxy is a running oauth2-proxy.
type Proxy struct {
	// URL is where browsers reach it, e.g. http://127.0.0.1:PORT.
	URL string
}

// ProxyRedirectURL is the callback oauth2-proxy on port uses, to register
// at the provider before either starts.
func ProxyRedirectURL(port int) string {
	return fmt.Sprintf("http://127.0.0.1:%d/oauth2/callback", port)
}

// StartOAuth2Proxy builds (once) and starts oauth2-proxy with the OpenID
// Connect provider, PKCE S256 and nonce checks on, the example server's
// "web" client, any email domain, and the user passed to the upstream in
// X-Forwarded-User (the subject), X-Forwarded-Email and
// X-Forwarded-Preferred-Username. It waits until the proxy answers.
func StartOAuth2Proxy(tb testing.TB, o ProxyOptions) *Proxy {
	tb.Helper()
	bin := binary(tb, oauth2ProxyPkg, OAuth2ProxyVersion, "oauth2-proxy", "oauth2-proxy")
	port := o.Port
	if port == 0 {
		port = FreePort(tb)
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	// The example configuration in deploy/ is the base; the flags below
	// put the test's provider, client and addresses over it.
	args := append([]string{
		"--config=" + deployConfig(),
		"--provider=oidc",
		"--oidc-issuer-url=" + o.Provider.Issuer,
		"--client-id=" + ClientID,
		"--client-secret=" + ClientSecret,
		"--redirect-url=" + ProxyRedirectURL(port),
		"--http-address=" + fmt.Sprintf("127.0.0.1:%d", port),
		"--upstream=" + o.Upstream,
		"--cookie-secret=" + hex.EncodeToString(secret), // 32 characters
		"--cookie-secure=false",                         // plain http on loopback
		"--email-domain=*",
		"--code-challenge-method=S256",
		"--insecure-oidc-skip-nonce=false",
		"--pass-user-headers=true",
		"--set-xauthrequest=true",
		"--skip-provider-button=true",
	}, o.Args...)
	_, logs, done := run(tb, "oauth2-proxy", bin, args, nil)
	p := &Proxy{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	testsupport.Poll(tb, 60*time.Second, func() error {
		select {
		case <-done:
			tb.Fatalf("oidcprovider: oauth2-proxy exited:\n%s", logs.String())
		default:
		}
		resp, err := http.Get(p.URL + "/ping")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/ping answered %s", resp.Status)
		}
		return nil
	})
	return p
}

// deployConfig is deploy/oauth2-proxy.cfg of this repository.
func deployConfig() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "oauth2-proxy.cfg")
}
