package docker_test

import (
	"testing"

	"github.com/canvasapp/companion/internal/testsupport/providercontract"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// TestProviderContract runs the core.Provider contract against the real
// Docker Engine with the box image.
func TestProviderContract(t *testing.T) {
	f := newFixture(t, docker.Config{})
	providercontract.Run(t, providercontract.Subject{
		Provider:  f.p,
		Account:   f.acct,
		MissingID: "companion-contract-missing-" + f.scope,
	})
}
