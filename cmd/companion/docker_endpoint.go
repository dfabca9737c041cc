package main

import (
	"context"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// dockerEndpoints gives the built-in docker adapter core.BoxEndpointer.
//
// TEMPORARY (exports-wire): the endpoints lane makes the adapters report
// their endpoints themselves; once *docker.Provider has a BoxEndpoint
// method, delete this type and register the adapter directly (this
// wrapper's method would otherwise shadow the adapter's).
//
// The docker adapter's box URL is the container's published agent-server
// port, which the adapter read from the Engine (not from anything the box
// says), and Box.Key is the session key it put in the container's
// environment at create. Embedding keeps every other interface the adapter
// implements (Pinger, Budgeter, …) visible to core.
type dockerEndpoints struct{ *docker.Provider }

var _ core.BoxEndpointer = dockerEndpoints{}

func (d dockerEndpoints) BoxEndpoint(_ context.Context, _ core.Account, box core.Box) (core.BoxEndpoint, error) {
	if box.URL == "" {
		return core.BoxEndpoint{}, core.Errorf(core.KindUnavailable, "docker box %s is %s and publishes no agent-server port", box.ID, box.State)
	}
	return core.BoxEndpoint{URL: box.URL, SessionKey: box.Key}, nil
}
