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

// Names returns the names of the modules built into this binary, sorted.
// It reads no module: start-up uses it with Open to read each module's
// manifest, and its code only to compile it.
func Names() []string {
	entries, err := fs.ReadDir(dist, "dist")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".wasm"); ok && name != "" && !e.IsDir() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Open opens the named module's file. It reads at any offset (io.ReaderAt)
// without copying the rest, so a host can read the manifest alone.
func Open(name string) (fs.File, error) {
	return dist.Open("dist/" + name + ".wasm")
}

// Embedded returns the modules built into this binary, sorted by name. It
// is empty when the binary was built before scripts/build-modules.sh ran.
// Each call returns fresh copies of the bytes.
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
