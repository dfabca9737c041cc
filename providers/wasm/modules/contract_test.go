package modules_test

import (
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/cloudflare"
	"github.com/canvasapp/companion/e2e/emulators/digitalocean"
	"github.com/canvasapp/companion/e2e/emulators/runtimeapi"
	"github.com/canvasapp/companion/internal/testsupport/providercontract"
)

// TestProviderContract runs the core.Provider contract against each
// first-party module, loaded in a real host, talking to its provider's
// emulator (instant transitions; the clock is advanced between polls so
// anything that does take emulated time finishes).
func TestProviderContract(t *testing.T) {
	t.Run("daytona", func(t *testing.T) {
		d := newDaytona(t, nil)
		run(t, d.env, providercontract.Subject{
			Account:   d.acct,
			MissingID: "00000000-0000-4000-8000-000000000000",
			Tick:      func() { d.clock.Advance(time.Second) },
		})
	})
	t.Run("e2b", func(t *testing.T) {
		d := newE2B(t, nil)
		run(t, d.env, providercontract.Subject{
			Account:   d.acct,
			MissingID: "inever0existed0000000",
			Tick:      func() { d.clock.Advance(time.Second) },
		})
	})
	t.Run("runtimeapi", func(t *testing.T) {
		d := newRuntimeAPI(t, runtimeapi.Options{})
		run(t, d.env, providercontract.Subject{
			Account:   d.acct,
			MissingID: "companion-" + d.acct.ID + "-ws_never0existed",
			Tick:      func() { d.clock.Advance(time.Second) },
		})
	})
	t.Run("cloudflare", func(t *testing.T) {
		d := newCloudflare(t, cloudflare.Options{})
		run(t, d.env, providercontract.Subject{
			Account: d.acct,
			// Well formed for the bridge, but not an id this account makes.
			MissingID: "neverexisted",
			Tick:      func() { d.clock.Advance(time.Second) },
			NoRecords: true,
		})
	})
	t.Run("digitalocean", func(t *testing.T) {
		d := newDO(t, digitalocean.Options{}, nil)
		run(t, d.env, providercontract.Subject{
			Account:   d.acct,
			MissingID: "sess_never0existed0000000000",
			Tick:      func() { d.clock.Advance(time.Second) },
		})
	})
}

func run(t *testing.T, e *env, s providercontract.Subject) {
	t.Helper()
	s.Provider = e.prov
	s.Check = func(t *testing.T, err error) { e.check(err) }
	providercontract.Run(t, s)
}
