//go:build unix

package main

import (
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// inode identifies a file for hard-link detection; ok is false when the
// platform does not say.
func inode(fi fs.FileInfo) (dev, ino, nlink uint64, ok bool) {
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat {
		return 0, 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), uint64(st.Nlink), true
}

// writable is os.access(p, W_OK): whether this process's real user may
// write in p.
func writable(p string) bool {
	return syscall.Access(p, 2) == nil
}

// umask reads the process's file mode mask without changing it (changing
// it, even briefly, would race with files other requests create).
func umask() os.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return os.FileMode(n)
				}
			}
		}
	}
	return 0o022
}
