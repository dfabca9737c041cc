// Package uibridge is companion's front-end surface: the HTTP API, the
// WebSocket status stream and the route gate in front of both.
//
// It translates requests into calls on a core.Service and the service's
// change feed into stream messages, and holds no domain logic. The wire
// contract (routes, JSON shapes, errors, stream messages, close codes and
// how a browser passes the token) is documented in API.md next to this
// file; the types in wire.go are that contract in Go.
//
// The gate runs first on every request: a Host allowlist (against DNS
// rebinding), an Origin allowlist (against cross-site requests and
// WebSocket hijacking), cross-origin protection for unsafe methods, and on
// /v1/ an Authenticator (the per-launch token on the desktop).
package uibridge
