package wire

import (
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
)

// Clocks converts the deletion clocks a module's manifest declares into
// core's. The manifest was validated when it was read (manifest.Parse, at
// every inspect, install and load), so every value here is one core knows.
// A module that declares none gets an empty list, never nil: "no clocks"
// is a statement about the provider, and GET /v1/providers says it as [].
func Clocks(cs []manifest.Clock) []core.DeletionClock {
	out := make([]core.DeletionClock, 0, len(cs))
	for _, c := range cs {
		out = append(out, core.DeletionClock{
			Name:    c.Name,
			Starts:  c.Starts,
			After:   time.Duration(c.AfterSeconds) * time.Second,
			Loses:   c.Loses,
			Setting: c.Setting,
			Note:    c.Note,
		})
	}
	return out
}
