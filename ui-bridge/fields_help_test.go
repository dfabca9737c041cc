package uibridge

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// helpedProvider describes its settings and options as the first-party
// modules do: each with a description and an example, one without.
type helpedProvider struct{ pausedProvider }

func (*helpedProvider) Describe(context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{Name: "helped", Version: "1", Kind: "wasm", Capabilities: core.Capabilities{Suspend: true, Delete: true},
		Config: []core.ConfigField{
			{Name: "api_url", Description: "Base URL of a self-hosted API (empty: the cloud's)", Example: "https://api.example.com"},
			{Name: "region", Description: "Region of new boxes", Required: true},
		},
		Options: []core.ConfigField{{Name: "target", Description: "Region of this box", Example: "eu"}},
	}, nil
}

// TestProvidersCarryFieldHelp: GET /v1/providers gives each setting and
// option its description and example (the account form's help), leaves
// out an example the provider does not give, and carries the Docker
// adapter's own.
func TestProvidersCarryFieldHelp(t *testing.T) {
	reg := &core.Registry{}
	reg.Register("helped", &helpedProvider{})
	dk, err := docker.New(docker.Config{Host: "unix:///nonexistent/docker.sock", Logger: slogTo(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	defer dk.Close()
	reg.Register("docker", dk)
	e := newEnvWith(t, openStore(t), reg, nil)
	resp, body := e.do("GET", "/v1/providers", "")
	if resp.StatusCode != 200 {
		t.Fatalf("providers: %d %s", resp.StatusCode, body)
	}
	var got struct {
		Providers []struct {
			Name    string            `json:"name"`
			Config  []json.RawMessage `json:"config"`
			Options []ConfigField     `json:"options"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range got.Providers {
		switch p.Name {
		case "helped":
			seen++
			if len(p.Config) != 2 ||
				string(p.Config[0]) != `{"name":"api_url","description":"Base URL of a self-hosted API (empty: the cloud's)","example":"https://api.example.com","required":false}` ||
				string(p.Config[1]) != `{"name":"region","description":"Region of new boxes","required":true}` {
				t.Errorf("config: %s", body)
			}
			if len(p.Options) != 1 || p.Options[0] != (ConfigField{Name: "target", Description: "Region of this box", Example: "eu"}) {
				t.Errorf("options: %s", body)
			}
		case "docker":
			seen++
			if len(p.Options) != 1 || p.Options[0].Name != "image" || p.Options[0].Description == "" || p.Options[0].Example != docker.DefaultImage {
				t.Errorf("docker options: %s", body)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("providers missing: %s", body)
	}
}
