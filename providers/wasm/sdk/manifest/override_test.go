package manifest

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "localhost.": true, "api.localhost": true,
		"127.0.0.1": true, "127.9.8.7": true, "::1": true, "::ffff:127.0.0.1": true,
		"10.0.0.1": false, "192.168.1.10": false, "0.0.0.0": false, "::": false,
		"localhost.example": false, "127.0.0.1.nip.io": false, "mylocalhost": false, "api.example": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v", host, got)
		}
	}
}

func TestParseOverride(t *testing.T) {
	for _, ok := range []string{"https://api.example", "https://10.0.0.5:8443/x", "http://localhost:8080", "http://127.0.0.1:1/api", "http://[::1]:9000"} {
		if _, err := ParseOverride(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for raw, want := range map[string]string{
		"http://api.example":        "use https://",
		"http://10.0.0.5:8080":      "10.0.0.5, which is not a loopback host",
		"http://[fe80::1]":          "not a loopback host",
		"ftp://localhost":           "http:// or https://",
		"https://u:p@api.example":   "user info",
		"http://localhost.evil.com": "not a loopback host",
	} {
		if _, err := ParseOverride(raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", raw, err, want)
		}
	}
}

func TestCheckAccountConfig(t *testing.T) {
	b, _ := json.Marshal(base())
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckAccountConfig(map[string]string{"api_url": "http://127.0.0.1:4000", "region": "http://not-an-override"}); err != nil {
		t.Fatalf("loopback http refused, or a non-override field checked: %v", err)
	}
	err = m.CheckAccountConfig(map[string]string{"api_url": "http://api.acme.example"})
	if err == nil || !strings.Contains(err.Error(), "config field api_url") || !strings.Contains(err.Error(), "use https://") {
		t.Fatalf("got %v", err)
	}
	if err := m.CheckAccountConfig(nil); err != nil {
		t.Fatal(err)
	}
}
