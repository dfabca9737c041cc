//go:build windows

package main

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockOffset is where the lock byte lies: far past the pid written at the
// start of the file, because Windows locks are mandatory and a waiting
// companion must still be able to read who holds the lock.
const lockOffset = 1 << 30

// winLock is fileLock with LockFileEx on one byte of companion.lock;
// Windows releases it when the process ends, even when it is killed.
type winLock struct {
	h  windows.Handle
	ol *windows.Overlapped
}

func newFileLock(f *os.File) fileLock {
	return winLock{h: windows.Handle(f.Fd()), ol: &windows.Overlapped{Offset: lockOffset}}
}

func (l winLock) tryLock() (bool, error) {
	err := windows.LockFileEx(l.h, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, l.ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return true, nil
	}
	return false, err
}

func (l winLock) unlock() { windows.UnlockFileEx(l.h, 0, 1, 0, l.ol) }
