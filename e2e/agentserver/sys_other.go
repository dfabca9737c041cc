//go:build !unix

package main

import (
	"io/fs"
	"os"
)

func inode(fs.FileInfo) (dev, ino, nlink uint64, ok bool) { return 0, 0, 0, false }

func writable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().Perm()&0o200 != 0
}

func umask() os.FileMode { return 0o022 }
