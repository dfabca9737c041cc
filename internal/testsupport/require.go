package testsupport

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// Environment variables `make test` (and CI) set to turn a skip for a
// missing environment into a failure, so that nothing is skipped silently
// where the environment is supposed to be complete.
const (
	// RequireKeyring: the OS keyring must be reachable
	// (scripts/with-keyring.sh starts a private one).
	RequireKeyring = "COMPANION_REQUIRE_KEYRING"
	// RequireModules: the first-party Wasm modules must be embedded in the
	// test binary (make test builds them before compiling the tests).
	RequireModules = "COMPANION_REQUIRE_MODULES"
	// RequireStores: the object-storage test servers must start (an S3
	// server, versitygw, built by scripts/versitygw.sh; a GCS emulator,
	// in process).
	RequireStores = "COMPANION_REQUIRE_STORES"
)

// Required reports whether the environment variable env is set to 1.
func Required(env string) bool { return os.Getenv(env) == "1" }

// SkipUnlessRequired skips tb with the reason, or fails it when env is set
// to 1.
func SkipUnlessRequired(tb testing.TB, env, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required(env) {
		tb.Fatalf("%s (%s=1 requires it)", msg, env)
	}
	tb.Skip(msg)
}

// Checker is what NeedKeyring needs of secrets.Keyring; an interface keeps
// this package free of companion's imports.
type Checker interface {
	Check(ctx context.Context) error
}

// NeedKeyring skips tb when the OS keyring cannot be reached, or fails it
// under RequireKeyring.
func NeedKeyring(tb testing.TB, k Checker) {
	tb.Helper()
	if err := k.Check(context.Background()); err != nil {
		SkipUnlessRequired(tb, RequireKeyring, "OS keyring unavailable (run `make test` or scripts/with-keyring.sh): %v", err)
	}
}
