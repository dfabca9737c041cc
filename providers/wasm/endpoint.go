package wasm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"syscall"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/providers/wasm/internal/wire"
)

var _ core.EndpointReporter = (*Adapter)(nil)

// ErrEndpointHost is wrapped by Endpoint when a module returned an
// agent-server URL whose host its manifest does not declare.
var ErrEndpointHost = manifest.ErrEndpointHost

// Endpoint implements core.EndpointReporter through the module's optional
// endpoint op. The URL is untrusted: its host must match the manifest's
// endpoint rule (or the account's override of it); header values that
// carry an account credential are refused; the credentials the rule names
// are then added by the host, never by the module.
func (a *Adapter) Endpoint(ctx context.Context, acct core.Account, boxID string) (core.Endpoint, error) {
	var out wire.EndpointOut
	err := a.invoke(ctx, wire.OpEndpoint, &acct, boxID, nil, func(b []byte) (*wire.ErrorBody, error) { return wire.DecodeEndpoint(b, &out) }, func(hc *hostcall.Call) error {
		if _, err := a.man.CheckEndpointURL(out.URL, acct.Config); err != nil {
			return &core.Error{Kind: core.KindInternal, Err: err,
				Message: fmt.Sprintf("provider module %s returned an agent-server URL that was refused: %s", a.name, wire.CleanMessage(hc.Redact(err.Error())))}
		}
		if hc.Leaks(out.URL) {
			return core.Errorf(core.KindInternal, "provider module %s returned an agent-server URL that carries the account's credential; it was dropped", a.name)
		}
		for k, v := range out.Headers {
			if hc.Leaks(k) || hc.Leaks(v) {
				return core.Errorf(core.KindInternal, "provider module %s returned an agent-server header that carries the account's credential; it was dropped", a.name)
			}
			if err := checkEndpointHeader(k); err != nil {
				return core.Errorf(core.KindInternal, "provider module %s returned agent-server header %q: %v", a.name, k, err)
			}
		}
		return nil
	})
	if err != nil {
		return core.Endpoint{}, err
	}
	ep := core.Endpoint{URL: out.URL, Headers: map[string]string{}}
	for k, v := range out.Headers {
		ep.Headers[textproto.CanonicalMIMEHeaderKey(k)] = v
	}
	for _, c := range a.man.EndpointCredentials() {
		v, err := a.h.cfg.Credentials.Credential(ctx, acct.ID, c.Name)
		if err != nil {
			return core.Endpoint{}, fmt.Errorf("agent-server endpoint of %s: credential %s: %w", a.name, c.Name, err)
		}
		f := c.Format
		if f == "" {
			f = "{token}"
		}
		ep.Headers[textproto.CanonicalMIMEHeaderKey(c.Header)] = strings.Replace(f, "{token}", v, 1)
	}
	return ep, nil
}

// checkEndpointHeader refuses header names a module may not set toward an
// agent-server: transport headers, and the session key, which companion
// owns.
func checkEndpointHeader(k string) error {
	lk := strings.ToLower(k)
	switch {
	case k == "" || strings.ContainsAny(k, " :\r\n\t"):
		return errors.New("is not a header name")
	case lk == "host" || lk == "cookie" || lk == "connection" || lk == "transfer-encoding" || lk == "content-length" || strings.HasPrefix(lk, "proxy-"):
		return errors.New("is a transport header")
	case lk == "x-session-api-key":
		return errors.New("is the agent-server key, which companion sets itself")
	}
	return nil
}

// EndpointClient returns an HTTP client for agent-server endpoints (for
// agentclient.New). It applies the guard http_request applies: a name under
// a loopback pattern (localhost, *.localhost, 127.0.0.0/8, ::1, which only
// an account's own override can allow) is dialed at loopback only; every
// other host must resolve to public addresses. No proxy from the
// environment; redirects are the caller's concern (agentclient refuses them).
func EndpointClient() *http.Client {
	strict := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: publicOnly}
	loop := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if manifest.LoopbackHost(host) {
				if ip, err := netip.ParseAddr(host); err == nil {
					return loop.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
				}
				// *.localhost never goes to DNS (RFC 6761).
				return loop.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
			}
			return strict.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{Transport: tr}
}

func publicOnly(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected dial address %q", address)
	}
	if hostcall.Blocked(ap.Addr()) {
		return &hostcall.BlockedAddrError{Addr: ap.Addr().Unmap()}
	}
	return nil
}
