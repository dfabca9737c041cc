package modules_test

import (
	"context"
	"slices"
	"testing"
)

// TestModulesDeclareTheirOptions: each first-party module's manifest lists
// exactly the creation options its code accepts, so companion can refuse a
// misspelt one before creating anything.
func TestModulesDeclareTheirOptions(t *testing.T) {
	want := map[string][]string{
		"daytona":      {"snapshot", "target"},
		"e2b":          {"template"},
		"digitalocean": {"config_id", "agent_kind", "repo_hint"},
	}
	for module, names := range want {
		e := newEnv(t, module)
		info, err := e.prov.Describe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range info.Options {
			if o.Description == "" {
				t.Errorf("%s: option %s has no description", module, o.Name)
			}
			got = append(got, o.Name)
		}
		if info.Options == nil || !slices.Equal(got, names) {
			t.Errorf("%s declares options %v, want %v", module, got, names)
		}
	}
}
