// Package dockertest gives tests that need the Docker Engine the box image
// (built once per test binary by e2e/boximage) and a Docker scope of their
// own, cleaned up when the test ends. It replaces the testing-bound
// helpers that used to live in e2e/boximage's non-test files.
package dockertest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/boximage"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

var (
	once     sync.Once
	imageTag string
	imageErr error
)

// BoxImage returns the box image, building it once per test binary. With
// -short the test is skipped; when the engine cannot be reached it fails
// with the reason.
func BoxImage(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs the Docker Engine; skipped with -short")
	}
	once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		imageTag, imageErr = boximage.Ensure(ctx)
	})
	if imageErr != nil {
		tb.Fatalf("box image (these tests need a reachable Docker Engine; -short skips them): %v", imageErr)
	}
	return imageTag
}

// BoxImageEnv is BoxImage for a variant with env baked in (see
// boximage.EnsureEnv); it is built on first use and reused after.
func BoxImageEnv(tb testing.TB, env map[string]string) string {
	tb.Helper()
	BoxImage(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tag, err := boximage.EnsureEnv(ctx, env)
	if err != nil {
		tb.Fatalf("box image with %v: %v", env, err)
	}
	return tag
}

// Scope returns a docker scope unique to the test and removes every
// container and volume in it when the test ends, failed or not.
func Scope(tb testing.TB) string {
	tb.Helper()
	scope := strings.ToLower(core.NewID("test"))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := boximage.Cleanup(ctx, docker.LabelScope, scope); err != nil {
			tb.Errorf("cleanup of scope %s: %v", scope, err)
		}
	})
	return scope
}
