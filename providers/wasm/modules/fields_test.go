package modules_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canvasapp/companion/providers/wasm"
	"github.com/canvasapp/companion/providers/wasm/sdk/manifest"
)

// TestFieldsDescribed holds every first-party module to describing each
// account setting and creation option with a description and an example:
// the page's account form, GET /v1/providers and `providers inspect` show
// them as the fields' help (docs/providers/).
func TestFieldsDescribed(t *testing.T) {
	ctx := context.Background()
	host, err := wasm.New(wasm.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close(ctx)
	for name, bin := range built {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(name, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			m, err := manifest.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			for _, fs := range [][]manifest.ConfigField{m.Config, m.Options} {
				for _, f := range fs {
					if f.Description == "" || f.Example == "" {
						t.Errorf("manifest.json: %q has description %q, example %q", f.Name, f.Description, f.Example)
					}
				}
			}
			// The packed module (what companion embeds) carries them too.
			s, err := host.Inspect(ctx, bin)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Config) != len(m.Config) {
				t.Fatalf("built module has %d settings, manifest.json %d: run make modules", len(s.Config), len(m.Config))
			}
			for i, f := range s.Config {
				if f.Example == "" || f.Example != m.Config[i].Example {
					t.Errorf("built module: %s example %q, manifest.json %q: run make modules", f.Name, f.Example, m.Config[i].Example)
				}
				// `companion providers inspect` prints the summary's text.
				if line := "    " + f.Name + ": " + f.Description + " (example: " + f.Example + ")"; !strings.Contains(s.String(), line) {
					t.Errorf("inspect text lacks %q:\n%s", line, s)
				}
			}
		})
	}
}
