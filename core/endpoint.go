package core

import "context"

// Endpoint is how companion reaches a box's agent-server from outside: the
// URL its provider exposes and the extra headers that provider's proxy
// wants on every request (Daytona's preview token, E2B's traffic token).
// Header values are secrets: never log or store them.
type Endpoint struct {
	URL     string
	Headers map[string]string
}

// EndpointReporter is implemented by adapters that can say where a box's
// agent-server is. It is optional so adapters written before it keep
// compiling; one that cannot reach the box answers KindInvalid (not
// supported) or KindNotFound. Call it after every create and resume:
// some providers change the URL or token on start.
type EndpointReporter interface {
	Endpoint(ctx context.Context, acct Account, boxID string) (Endpoint, error)
}
