package exportstore

import (
	"os"
	"path/filepath"
	"runtime"
)

// durable makes a just-written object of a file:// store survive a crash
// before it is read back: fileblob renames its temp file into place
// without fsync, so the file and its directory are synced here (as
// package exports does). Other stores are durable once the upload
// completes.
func (s *Store) durable(key string) error {
	if s.kind != "file" {
		return nil
	}
	p := filepath.Join(s.fileDir, filepath.FromSlash(key))
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	f.Close()
	if err != nil || runtime.GOOS == "windows" {
		return err
	}
	d, err := os.Open(filepath.Dir(p))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
