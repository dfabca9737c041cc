// Package modules holds companion's first-party provider modules
// (daytona, e2b, digitalocean), each a main package built with the guest
// SDK for GOOS=wasip1 GOARCH=wasm and packed with its manifest exactly as
// a third party's module would be. scripts/build-modules.sh writes them to
// dist/; this package embeds what is there into the binary.
package modules

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed dist
var dist embed.FS

// Module is one built module: its file name without .wasm, and the packed
// bytes (code plus manifest), ready for wasm.Host.LoadEmbedded.
type Module struct {
	Name string
	Wasm []byte
}

// Embedded returns the modules built into this binary, sorted by name. It
// is empty when the binary was built before scripts/build-modules.sh ran.
// The bytes are shared: callers must not modify them.
func Embedded() []Module {
	entries, err := fs.ReadDir(dist, "dist")
	if err != nil {
		return nil
	}
	var out []Module
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".wasm")
		if !ok || name == "" || e.IsDir() {
			continue
		}
		b, err := dist.ReadFile("dist/" + e.Name())
		if err != nil {
			continue
		}
		out = append(out, Module{Name: name, Wasm: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
