//go:build unix || windows

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// fileLock is the platform's exclusive, non-blocking lock on an open file
// (flock on unix, LockFileEx on windows). The OS drops it when the process
// ends, even when it is killed.
type fileLock interface {
	// tryLock takes the lock without waiting: busy when another process
	// holds it, err for any other failure.
	tryLock() (busy bool, err error)
	// unlock releases the lock taken by tryLock.
	unlock()
}

// lockDataDir takes an exclusive lock on dir, so that two companions never
// run on one data directory: each keeps workspaces in memory and would
// overwrite the other's updates and re-run the other's journal. It waits up
// to wait for a previous companion that is still shutting down (the
// desktop app restarting its child). The lock goes with the process; the
// holder's pid is written to companion.lock so a waiting companion can
// name it. waiting, when not nil, is told the holder's pid at once when the
// lock is busy, before the wait: a person who started a second companion
// learns why nothing happens yet.
func lockDataDir(ctx context.Context, dir string, wait time.Duration, waiting func(holder string)) (release func(), err error) {
	path := filepath.Join(dir, "companion.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	l := newFileLock(f)
	deadline := time.Now().Add(wait)
	for {
		busy, err := l.tryLock()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock data dir: %w", err)
		}
		if !busy {
			break
		}
		if waiting != nil {
			waiting(lockHolder(path))
			waiting = nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another companion (pid %s) is using the data dir %s; stop it or choose another --data-dir",
				lockHolder(path), dir)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Overwrite in place and truncate only when the old pid was longer:
	// a truncate costs a file system journal entry on every start.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	f.WriteAt(pid, 0)
	if st, err := f.Stat(); err != nil || st.Size() != int64(len(pid)) {
		f.Truncate(int64(len(pid)))
	}
	return func() {
		l.unlock()
		f.Close()
	}, nil
}

// lockHolder is the pid the holder of the lock at path wrote, or "unknown".
func lockHolder(path string) string {
	holder, _ := os.ReadFile(path)
	return orUnknown(string(bytes.TrimSpace(holder)))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
