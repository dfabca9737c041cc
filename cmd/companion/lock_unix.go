//go:build unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// flockLock is fileLock with flock(2); closing the file releases it.
type flockLock struct{ f *os.File }

func newFileLock(f *os.File) fileLock { return flockLock{f} }

func (l flockLock) tryLock() (bool, error) {
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

// unlock does nothing: the file's close (lockDataDir's release) drops it.
func (flockLock) unlock() {}
