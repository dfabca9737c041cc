//go:build !linux

package secrets

// noSessionBus: only Linux reaches its keyring over a D-Bus session bus.
func noSessionBus() error { return nil }
