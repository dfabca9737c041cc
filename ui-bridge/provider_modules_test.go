package uibridge

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/canvasapp/companion/core"
)

// factsAdmin is a ModuleAdmin that knows one module's facts, as the
// module registry would, and counts how often it was asked.
type factsAdmin struct {
	ModuleAdmin // routes other than the list are not used here
	asked       []string
}

func (a *factsAdmin) ModuleFacts(_ context.Context, name string) (ModuleFacts, bool) {
	a.asked = append(a.asked, name)
	if name != "liar" {
		return ModuleFacts{}, false
	}
	return ModuleFacts{SHA256: "ab12", Hosts: []string{"https://api.liar.example"}, EndpointHosts: []string{"*.box.liar.example"}}, true
}

// TestProvidersCarryModuleFacts: GET /v1/providers gives a Wasm module its
// hash and hosts, and leaves them out for a provider that is not one.
func TestProvidersCarryModuleFacts(t *testing.T) {
	reg := &core.Registry{}
	reg.Register("liar", &inventingProvider{})
	reg.Register("still", &pausedProvider{})
	admin := &factsAdmin{}
	e := newEnvWith(t, openStore(t), reg, func(c *Config) { c.Modules = admin })
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
	byName := map[string]map[string]json.RawMessage{}
	for _, p := range got.Providers {
		var n string
		_ = json.Unmarshal(p["name"], &n)
		byName[n] = p
	}
	liar, plain := byName["liar"], byName["still"]
	if liar == nil || plain == nil {
		t.Fatalf("providers missing: %s", body)
	}
	if string(liar["sha256"]) != `"ab12"` || string(liar["hosts"]) != `["https://api.liar.example"]` ||
		string(liar["endpoint_hosts"]) != `["*.box.liar.example"]` {
		t.Fatalf("module facts: %s", body)
	}
	for _, k := range []string{"sha256", "hosts", "endpoint_hosts"} {
		if _, ok := plain[k]; ok {
			t.Fatalf("a provider that is no module carries %s: %s", k, body)
		}
	}
	slices.Sort(admin.asked)
	if !slices.Equal(admin.asked, []string{"liar", "still"}) {
		t.Fatalf("asked for %v", admin.asked)
	}
}

// TestProvidersWithoutModuleFacts: a ModuleAdmin that cannot describe
// modules leaves the list as it was.
func TestProvidersWithoutModuleFacts(t *testing.T) {
	reg := &core.Registry{}
	reg.Register("liar", &inventingProvider{})
	e := newEnvWith(t, openStore(t), reg, func(c *Config) { c.Modules = struct{ ModuleAdmin }{} })
	resp, body := e.do("GET", "/v1/providers", "")
	var got struct {
		Providers []map[string]json.RawMessage `json:"providers"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &got) != nil || len(got.Providers) != 1 {
		t.Fatalf("providers: %d %s", resp.StatusCode, body)
	}
	if _, ok := got.Providers[0]["sha256"]; ok {
		t.Fatalf("sha256 without a source: %s", body)
	}
}
