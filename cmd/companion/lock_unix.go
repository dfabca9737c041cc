//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// lockDataDir takes an exclusive lock on dir, so that two companions never
// run on one data directory: each keeps workspaces in memory and would
// overwrite the other's updates and re-run the other's journal. It waits up
// to wait for a previous companion that is still shutting down (the
// desktop app restarting its child). The lock goes with the process.
func lockDataDir(ctx context.Context, dir string, wait time.Duration) (release func(), err error) {
	path := filepath.Join(dir, "companion.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock data dir: %w", err)
		}
		if time.Now().After(deadline) {
			holder, _ := os.ReadFile(path)
			f.Close()
			return nil, fmt.Errorf("another companion (pid %s) is using the data dir %s; stop it or choose another --data-dir",
				orUnknown(string(bytes.TrimSpace(holder))), dir)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
