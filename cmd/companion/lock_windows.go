//go:build windows

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/windows"
)

// lockOffset is where the lock byte lies: far past the pid written at the
// start of the file, because Windows locks are mandatory and a waiting
// companion must still be able to read who holds the lock.
const lockOffset = 1 << 30

// lockDataDir takes an exclusive lock on dir, as on unix (lock_unix.go):
// two companions on one data dir would overwrite each other's updates and
// re-run each other's journal. It uses LockFileEx on a byte of
// companion.lock; Windows releases the lock when the process ends, even
// when it is killed. It waits up to wait for a companion that is still
// shutting down.
func lockDataDir(ctx context.Context, dir string, wait time.Duration) (release func(), err error) {
	path := filepath.Join(dir, "companion.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	h := windows.Handle(f.Fd())
	ol := &windows.Overlapped{Offset: lockOffset}
	deadline := time.Now().Add(wait)
	for {
		err = windows.LockFileEx(h, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
		if err == nil {
			break
		}
		if !errors.Is(err, windows.ERROR_LOCK_VIOLATION) && !errors.Is(err, windows.ERROR_IO_PENDING) {
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
	return func() {
		windows.UnlockFileEx(h, 0, 1, 0, ol)
		f.Close()
	}, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
