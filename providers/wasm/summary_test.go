package wasm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
)

// The summary is an HTTP answer (POST /v1/providers/inspect): its call
// timeout is in seconds like every duration in ui-bridge/API.md, keeping
// the manifest's millisecond precision.
func TestSummaryLimitsInSeconds(t *testing.T) {
	for _, tc := range []struct {
		limits string
		json   string
		text   string
	}{
		{`{}`, `"call_timeout_seconds":30,`, "30s per call"},
		{`{"call_timeout_ms":1500}`, `"call_timeout_seconds":1.5,`, "1.5s per call"},
		{`{"call_timeout_ms":10}`, `"call_timeout_seconds":0.01,`, "10ms per call"},
		{`{"call_timeout_ms":300000}`, `"call_timeout_seconds":300,`, "5m0s per call"},
	} {
		raw := `{"name":"acme","version":"1.0.0","abi_version":1,"description":"Acme",
			"upstreams":{"api":{"base_url":"https://api.acme.example"}},
			"limits":` + tc.limits + `}`
		m, err := manifest.Parse([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		s := summarize(m, strings.Repeat("0", 64), false)
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.json) || strings.Contains(string(b), `"call_timeout"`) {
			t.Errorf("limits %s: answer %s, want %s", tc.limits, b, tc.json)
		}
		if !strings.Contains(s.String(), tc.text) {
			t.Errorf("limits %s: text lacks %q:\n%s", tc.limits, tc.text, s)
		}
	}
}
