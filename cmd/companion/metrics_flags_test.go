package main

import (
	"strings"
	"testing"
)

// --metrics-listen serves without a credential: loopback and private
// addresses only, unless --metrics-listen-public says otherwise.
func TestCheckMetricsListen(t *testing.T) {
	for _, c := range []struct {
		addr   string
		public bool
		ok     bool
	}{
		{"", false, true},
		{"127.0.0.1:9090", false, true},
		{"[::1]:9090", false, true},
		{"localhost:9090", false, true},
		{"10.0.0.5:9090", false, true},
		{"192.168.1.2:9090", false, true},
		{"[fd00::1]:9090", false, true},
		{"0.0.0.0:9090", false, false},
		{":9090", false, false},
		{"203.0.113.7:9090", false, false},
		{"0.0.0.0:9090", true, true},
		{"nonsense", false, false},
	} {
		err := checkMetricsListen(modeServe, c.addr, c.public)
		if (err == nil) != c.ok {
			t.Errorf("checkMetricsListen(%q, %v) = %v, want ok %v", c.addr, c.public, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--metrics-listen") {
			t.Errorf("the error does not name the flag: %v", err)
		}
	}
	// Desktop: loopback only, whatever --metrics-listen-public says.
	for addr, ok := range map[string]bool{"127.0.0.1:9090": true, "[::1]:9090": true, "10.0.0.5:9090": false, "0.0.0.0:9090": false} {
		if err := checkMetricsListen(modeDesktop, addr, true); (err == nil) != ok {
			t.Errorf("desktop checkMetricsListen(%q) = %v, want ok %v", addr, err, ok)
		}
	}
}
