package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

var tempDir struct {
	once sync.Once
	dir  string
	err  error
}

// pyTempDir is tempfile.gettempdir(): the first of $TMPDIR, $TEMP, $TMP,
// /tmp, /var/tmp, /usr/tmp and the working directory where a file can be
// created (the box image has no /tmp). It is found once, as Python caches
// it.
func pyTempDir() (string, error) {
	tempDir.once.Do(func() {
		var dirs []string
		for _, k := range []string{"TMPDIR", "TEMP", "TMP"} {
			if v := os.Getenv(k); v != "" {
				dirs = append(dirs, v)
			}
		}
		dirs = append(dirs, "/tmp", "/var/tmp", "/usr/tmp")
		if wd, err := os.Getwd(); err == nil {
			dirs = append(dirs, wd)
		}
		for _, d := range dirs {
			f, err := os.CreateTemp(d, "probe")
			if err == nil {
				f.Close()
				os.Remove(f.Name())
				tempDir.dir, _ = filepath.Abs(d)
				return
			}
		}
		tempDir.err = fmt.Errorf("no usable temporary directory found in %s", strconv.Quote(fmt.Sprint(dirs)))
	})
	return tempDir.dir, tempDir.err
}
