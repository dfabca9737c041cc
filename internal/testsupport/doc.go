// Package testsupport holds the helpers companion's tests share: polling a
// condition until a deadline, and skipping a test whose environment is
// missing, or failing it when `make test` said that environment must be
// there. It imports nothing of companion, so tests of any package,
// internal ones included, can use it without an import cycle.
//
// Helpers that need companion's own packages live in subpackages
// (dockertest: the box image and per-test Docker scopes), and so do the
// object-storage servers, which pull in their SDKs: s3server (versitygw),
// gcsserver (fake-gcs-server) and faultproxy (5xx and stalls in front of
// either).
package testsupport
