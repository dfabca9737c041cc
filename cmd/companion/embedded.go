package main

import "companion/providers/wasm/modules"

// embeddedModules returns the first-party provider modules built into the
// binary (by scripts/build-modules.sh, before go build).
func embeddedModules() [][]byte {
	var out [][]byte
	for _, m := range modules.Embedded() {
		out = append(out, m.Wasm)
	}
	return out
}
