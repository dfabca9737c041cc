//go:build unix

package oidcprovider

import (
	"os"
	"syscall"
)

// lockDir holds an exclusive lock on dir/.lock until unlock is called, so
// test binaries of several packages (go test ./... runs them in parallel)
// build a part once between them instead of each building it.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(dir+"/.lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
