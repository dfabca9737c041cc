package boximage

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

var (
	testOnce  sync.Once
	testImage string
	testErr   error
)

// ForTest returns the box image for tests that need the Docker Engine,
// building it once per test binary. With -short the test is skipped; when
// the engine cannot be reached it fails with the reason.
func ForTest(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs the Docker Engine; skipped with -short")
	}
	testOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		testImage, testErr = Ensure(ctx)
	})
	if testErr != nil {
		tb.Fatalf("box image (these tests need a reachable Docker Engine; -short skips them): %v", testErr)
	}
	return testImage
}

// TestScope returns a docker scope unique to the test and removes every
// container and volume in it when the test ends, failed or not.
func TestScope(tb testing.TB) string {
	tb.Helper()
	scope := strings.ToLower(core.NewID("test"))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := Cleanup(ctx, docker.LabelScope, scope); err != nil {
			tb.Errorf("cleanup of scope %s: %v", scope, err)
		}
	})
	return scope
}
