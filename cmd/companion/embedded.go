package main

// embeddedModules returns the first-party provider modules built into the
// binary.
func embeddedModules() [][]byte { return nil }
