// Package core is companion's domain: workspaces and the boxes they map to,
// provider capabilities, the Provider interface every adapter implements, the
// lifecycle service (create, pause, resume, delete), the reconciler and the
// change feed.
//
// core imports no adapter, store or transport. It defines the small
// interfaces it needs (Provider, Store, Secrets) and the rest of the program
// supplies them: db implements Store, providers/... implement Provider,
// ui-bridge calls Service, cmd/companion wires them together.
package core
