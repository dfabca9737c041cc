// Package e2e holds companion's end-to-end tests: they build the companion
// binary, start it as Canvas would, and drive it over HTTP and WebSocket
// against real parts (SQLite files, the OS keyring, the machine's Docker
// Engine, Wasm modules built from this repository) and emulators of the
// services that cannot run here (cloud provider APIs, the agent-server).
//
// Subpackages hold the emulators (agentserver, emulators/...) and the box
// image builder (boximage; tests get it through
// internal/testsupport/dockertest).
package e2e
