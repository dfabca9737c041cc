//go:build !unix && !windows

package main

import (
	"context"
	"time"
)

// lockDataDir is a no-op where neither flock (lock_unix.go) nor
// LockFileEx (lock_windows.go) exists; running two companions on one data
// dir is then the user's responsibility.
func lockDataDir(ctx context.Context, dir string, wait time.Duration, waiting func(holder string)) (release func(), err error) {
	return func() {}, nil
}
