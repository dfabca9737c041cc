package main

import (
	"io/fs"
	"log/slog"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm"
	"github.com/canvasapp/companion/providers/wasm/modules"
)

// loadFirstParty registers the first-party provider modules built into the
// binary (by scripts/build-modules.sh, before go build). Their manifests
// are read once the host starts, their code only when compiled, so they
// cost the ready line nothing.
func loadFirstParty(host *wasm.Host, reg *core.Registry, log *slog.Logger) {
	for _, name := range modules.Names() {
		a, err := host.LoadEmbeddedLazy(name, func() (fs.File, error) { return modules.Open(name) })
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
