// Package gcsserver starts a Google Cloud Storage emulator for tests:
// fake-gcs-server's fakestorage in process, serving plain HTTP on a free
// loopback port, one per test. Point a client at Endpoint (gocloud's
// gcsblob through a storage client with that endpoint and no
// authentication, as exportstore does for gs://bucket?endpoint=…).
//
// When it cannot start the test is skipped, or failed under
// COMPANION_REQUIRE_STORES=1.
package gcsserver

import (
	"io"
	"net/url"
	"testing"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// Server is a running emulator.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT.
	Endpoint string
	// Fake is the emulator itself, for looking at (or damaging) objects.
	Fake *fakestorage.Server
}

// Start runs the emulator for tb with the named buckets created, and
// stops it when tb ends.
func Start(tb testing.TB, buckets ...string) *Server {
	tb.Helper()
	fake, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		Host:   "127.0.0.1",
		Port:   0,
		Writer: io.Discard,
	})
	if err != nil {
		testsupport.SkipUnlessRequired(tb, testsupport.RequireStores, "fake-gcs-server did not start: %v", err)
		return nil
	}
	tb.Cleanup(fake.Stop)
	for _, b := range buckets {
		fake.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	return &Server{Endpoint: fake.URL(), Fake: fake}
}

// URL is a gs:// store URL for bucket and prefix on this server.
func (s *Server) URL(bucket, prefix string) string {
	u := url.URL{Scheme: "gs", Host: bucket, Path: "/" + prefix}
	u.RawQuery = url.Values{"endpoint": {s.Endpoint}}.Encode()
	return u.String()
}
