package manifest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func withEndpoint(t *testing.T, ep map[string]any) (*Manifest, error) {
	t.Helper()
	m := base()
	m["config"] = append(m["config"].([]any), map[string]any{"name": "proxy_hosts", "description": "Proxy host pattern"})
	m["endpoint"] = ep
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return Parse(raw)
}

func TestEndpointRuleValidation(t *testing.T) {
	for _, tc := range []struct {
		ep    map[string]any
		field string
	}{
		{map[string]any{"hosts": []any{}}, "endpoint.hosts"},
		{map[string]any{"hosts": []any{"*.com"}}, "endpoint.hosts[0]"},
		{map[string]any{"hosts": []any{"a.*.example"}}, "endpoint.hosts[0]"},
		{map[string]any{"hosts": []any{"Proxy.Example"}}, "endpoint.hosts[0]"},
		{map[string]any{"hosts": []any{"*.localhost"}}, "endpoint.hosts[0]"},
		{map[string]any{"hosts": []any{"*.proxy.example"}, "override": "nope"}, "endpoint.override"},
		{map[string]any{"hosts": []any{"*.proxy.example"}, "credentials": []any{"missing"}}, "endpoint.credentials[0]"},
		{map[string]any{"hosts": []any{"*.proxy.example"}, "extra": 1}, "extra"},
		{map[string]any{"hosts": []any{"*.proxy.example"}, "session_key": "box"}, "endpoint.session_key"},
	} {
		_, err := withEndpoint(t, tc.ep)
		var me *Error
		if !errors.As(err, &me) || me.Field != tc.field {
			t.Errorf("%v: got %v, want an error naming %s", tc.ep, err, tc.field)
		}
	}
	m, err := withEndpoint(t, map[string]any{"hosts": []any{"*.proxy.example", "exact.example"}, "override": "proxy_hosts", "credentials": []any{"token"}})
	if err != nil {
		t.Fatal(err)
	}
	if cs := m.EndpointCredentials(); len(cs) != 1 || cs[0].Header != "Authorization" {
		t.Fatalf("credentials %+v", cs)
	}
	for _, k := range []string{"companion", "provider"} {
		m, err := withEndpoint(t, map[string]any{"hosts": []any{"*.proxy.example"}, "session_key": k})
		if err != nil || m.Endpoint.SessionKey != k {
			t.Fatalf("session_key %s: %+v %v", k, m, err)
		}
	}
}

func TestCheckEndpointURL(t *testing.T) {
	m, err := withEndpoint(t, map[string]any{"hosts": []any{"*.proxy.example", "exact.example"}, "override": "proxy_hosts"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{"https://8000-abc.proxy.example", "https://a.b.proxy.example:8443/x", "https://exact.example"} {
		if _, err := m.CheckEndpointURL(ok, nil); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"https://proxy.example", "https://evilproxy.example", "https://sub.exact.example", "https://8000-abc.proxy.example.evil.test", "https://169.254.169.254"} {
		if _, err := m.CheckEndpointURL(bad, nil); !errors.Is(err, ErrEndpointHost) {
			t.Errorf("%s: got %v, want ErrEndpointHost", bad, err)
		}
	}
	if _, err := m.CheckEndpointURL("http://8000-abc.proxy.example", nil); err == nil || !strings.Contains(err.Error(), "plain http") {
		t.Errorf("plain http to a public host: %v", err)
	}
	if _, err := m.CheckEndpointURL("https://u:p@8000-abc.proxy.example", nil); err == nil {
		t.Error("user info accepted")
	}
	// An account override replaces the manifest's patterns.
	cfg := map[string]string{"proxy_hosts": "*.localhost"}
	if _, err := m.CheckEndpointURL("http://8000-abc.localhost:9999", cfg); err != nil {
		t.Errorf("override: %v", err)
	}
	if _, err := m.CheckEndpointURL("https://8000-abc.proxy.example", cfg); !errors.Is(err, ErrEndpointHost) {
		t.Errorf("override must replace the manifest hosts: %v", err)
	}
	if err := m.CheckAccountConfig(map[string]string{"proxy_hosts": "*.com"}); err == nil || !strings.Contains(err.Error(), "proxy_hosts") {
		t.Errorf("bad override accepted: %v", err)
	}
	noEP, _ := withEndpoint(t, nil)
	if _, err := noEP.CheckEndpointURL("https://x.proxy.example", nil); !errors.Is(err, ErrEndpointHost) {
		t.Errorf("no endpoint rule: %v", err)
	}
}
