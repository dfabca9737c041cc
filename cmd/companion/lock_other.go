//go:build !unix

package main

import (
	"context"
	"time"
)

// lockDataDir is a no-op where flock is missing; running two companions on
// one data dir is then the user's responsibility.
func lockDataDir(ctx context.Context, dir string, wait time.Duration) (release func(), err error) {
	return func() {}, nil
}
