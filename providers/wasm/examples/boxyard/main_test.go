package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/canvasapp/companion/providers/wasm/sdk"
	"github.com/canvasapp/companion/providers/wasm/sdk/manifest"
)

// The host refuses a module whose describe contradicts its manifest; this
// catches the drift natively, before a wasm build.
func TestDescribeMatchesManifest(t *testing.T) {
	raw, err := os.ReadFile("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		OK struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"ok"`
	}
	if err := json.Unmarshal(sdk.Dispatch("describe", []byte(`{}`)), &out); err != nil {
		t.Fatal(err)
	}
	if out.OK.Name != m.Name || out.OK.Version != m.Version {
		t.Fatalf("describe says %s %s, manifest.json %s %s", out.OK.Name, out.OK.Version, m.Name, m.Version)
	}
}

func TestBoxStates(t *testing.T) {
	for status, want := range map[string]sdk.State{
		"starting": sdk.Resuming, "running": sdk.Running, "stopping": sdk.Pausing,
		"stopped": sdk.Paused, "melting": sdk.Unknown,
	} {
		if got := (apiBox{ID: "b", Status: status}).box().State; got != want {
			t.Errorf("%s: %s, want %s", status, got, want)
		}
	}
}
