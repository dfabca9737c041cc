package uibridge

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// clockedProvider has the two kinds of deletion clock the first-party
// modules declare: a setting (Daytona's auto-delete) and one the provider
// runs with a period it does not publish (DigitalOcean's).
type clockedProvider struct{ pausedProvider }

func (*clockedProvider) Describe(context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{Name: "clocked", Version: "1", Kind: "wasm", Capabilities: core.Capabilities{Suspend: true, Delete: true, NativePausedTTL: true},
		Clocks: []core.DeletionClock{
			{Name: "auto_delete", Starts: core.ClockStartsPaused, Loses: core.ClockLosesBox, Setting: true, Note: "autoDeleteInterval"},
			{Name: "sleep_wipe", Starts: core.ClockStartsIdle, After: 10 * time.Minute, Loses: core.ClockLosesFiles},
		}}, nil
}

// TestProvidersCarryClocks: GET /v1/providers carries each provider's
// deletion clocks with their period in seconds, and [] for a provider
// that declares none.
func TestProvidersCarryClocks(t *testing.T) {
	reg := &core.Registry{}
	reg.Register("clocked", &clockedProvider{})
	reg.Register("still", &pausedProvider{}) // its info has no clocks (nil)
	e := newEnvWith(t, openStore(t), reg, nil)
	resp, body := e.do("GET", "/v1/providers", "")
	if resp.StatusCode != 200 {
		t.Fatalf("providers: %d %s", resp.StatusCode, body)
	}
	var got struct {
		Providers []map[string]json.RawMessage `json:"providers"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	clocks := map[string]string{}
	for _, p := range got.Providers {
		var n string
		_ = json.Unmarshal(p["name"], &n)
		clocks[n] = string(p["clocks"])
	}
	want := `[{"name":"auto_delete","starts":"paused","after_seconds":0,"loses":"box","setting":true,"note":"autoDeleteInterval"},` +
		`{"name":"sleep_wipe","starts":"idle","after_seconds":600,"loses":"files","setting":false,"note":""}]`
	if clocks["clocked"] != want {
		t.Fatalf("clocks of a provider with clocks:\n%s\nwant\n%s", clocks["clocked"], want)
	}
	if clocks["still"] != `[]` {
		t.Fatalf("clocks of a provider without: %s, want []", clocks["still"])
	}
}
