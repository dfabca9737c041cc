package main

import (
	"context"

	uibridge "github.com/canvasapp/companion/ui-bridge"
)

// ModuleFacts tells the bridge's provider list what a Wasm provider calls
// and which bytes are pinned. It reads the module's parsed manifest and the
// hash of the bytes the host loaded (equal to the pin, or the module would
// not have loaded); it compiles nothing.
func (p *providerSet) ModuleFacts(ctx context.Context, name string) (uibridge.ModuleFacts, bool) {
	a, ok := p.host.Adapter(name)
	if !ok {
		return uibridge.ModuleFacts{}, false
	}
	s := a.Summary()
	if s.SHA256 == "" {
		return uibridge.ModuleFacts{}, false
	}
	f := uibridge.ModuleFacts{SHA256: s.SHA256, Hosts: s.Hosts}
	if s.Endpoint != nil {
		f.EndpointHosts = s.Endpoint.Hosts
	}
	return f, true
}
