package main

import (
	"log/slog"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm"
	"github.com/canvasapp/companion/providers/wasm/modules"
)

// loadFirstParty registers the first-party provider modules built into the
// binary (by scripts/build-modules.sh, before go build). They are read and
// compiled only once the host starts compiling, so they cost the ready
// line nothing.
func loadFirstParty(host *wasm.Host, reg *core.Registry, log *slog.Logger) {
	for _, name := range modules.Names() {
		a, err := host.LoadEmbeddedLazy(name, func() ([]byte, error) { return modules.Read(name) })
		if err != nil {
			// A first-party module that does not load is a build defect;
			// companion still serves the other providers.
			log.Error("first-party provider module not loaded", "module", name, "err", err)
			continue
		}
		if reg != nil {
			reg.Register(a.Name(), a)
		}
	}
}
