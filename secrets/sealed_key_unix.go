//go:build unix

package secrets

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkOwner refuses a key file owned by another user than the one
// companion runs as: that user could replace the key.
func checkOwner(path string, st fs.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(sys.Uid) != uid {
		return fmt.Errorf("secret key file %s is owned by uid %d, not by the user companion runs as (uid %d); refusing it: run `chown %d %s` (and keep mode 600)", path, sys.Uid, uid, uid, path)
	}
	return nil
}
