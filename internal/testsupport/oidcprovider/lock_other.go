//go:build !unix

package oidcprovider

// lockDir is a no-op where flock is missing: concurrent test binaries may
// then both build a part; the rename into place keeps that safe.
func lockDir(string) (func(), error) { return func() {}, nil }
