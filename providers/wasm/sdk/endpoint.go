package sdk

import "context"

// Endpoint is how the host reaches a box's agent-server (ABI.md §5a): the
// URL its provider's proxy exposes and the box-scoped headers that proxy
// wants (a preview token, a traffic token). Account credentials never go
// here: the host attaches those itself, per the manifest's endpoint rule.
type Endpoint struct {
	URL     string
	Headers map[string]string
}

// Endpointer is implemented by providers whose boxes' agent-servers the
// host may reach. It is optional: a module without it (or built before
// it existed) answers op endpoint with Invalid "not supported", and the
// host treats the box as unreachable from outside.
type Endpointer interface {
	Endpoint(ctx context.Context, acct Account, id string) (Endpoint, error)
}
