package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// rm is the box image's /bin/rm (main, when the binary runs under that
// name): the one command companion runs in a box, a restore deleting what
// the snapshotted box had deleted.
func rm(args []string, stderr io.Writer) int {
	return rmFiles(args, stderr, func(p string) (string, error) { return p, nil })
}

// rmFiles is "rm [-f] [-r|-R] [-d] [--] PATH..." with GNU rm's messages
// and exit status (1 after any failure; the other paths are still
// tried). resolve maps each operand to the host path to remove (the
// shell's box-path mapping; the symlink itself, not its target). As GNU
// rm, it refuses "." and "..", and "/" recursively.
func rmFiles(args []string, stderr io.Writer, resolve func(string) (string, error)) int {
	force, recursive, dirs := false, false, false
	var paths []string
	opts := true
	for _, a := range args {
		switch {
		case !opts || a == "-" || !strings.HasPrefix(a, "-"):
			paths = append(paths, a)
		case a == "--":
			opts = false
		case a == "--force":
			force = true
		case a == "--recursive":
			recursive = true
		case a == "--dir":
			dirs = true
		case strings.HasPrefix(a, "--"):
			fmt.Fprintf(stderr, "rm: unrecognized option '%s'\nTry 'rm --help' for more information.\n", a)
			return 1
		default:
			for _, c := range a[1:] {
				switch c {
				case 'f':
					force = true
				case 'r', 'R':
					recursive = true
				case 'd':
					dirs = true
				default:
					fmt.Fprintf(stderr, "rm: invalid option -- '%c'\nTry 'rm --help' for more information.\n", c)
					return 1
				}
			}
		}
	}
	if len(paths) == 0 {
		if force {
			return 0
		}
		fmt.Fprint(stderr, "rm: missing operand\nTry 'rm --help' for more information.\n")
		return 1
	}
	code := 0
	fail := func(format string, a ...any) {
		fmt.Fprintf(stderr, "rm: "+format+"\n", a...)
		code = 1
	}
	for _, p := range paths {
		if b := filepath.Base(p); b == "." || b == ".." {
			fail("refusing to remove '.' or '..' directory: skipping '%s'", p)
			continue
		}
		if recursive && filepath.Clean(p) == "/" {
			fail("it is dangerous to operate recursively on '/'\nrm: use --no-preserve-root to override this failsafe")
			continue
		}
		h, err := resolve(p)
		if err != nil {
			err = syscall.ENOENT
		} else if top, terr := resolve("/"); recursive && terr == nil && filepath.Clean(h) == filepath.Clean(top) {
			fail("it is dangerous to operate recursively on '/'\nrm: use --no-preserve-root to override this failsafe")
			continue
		}
		var fi fs.FileInfo
		if err == nil {
			fi, err = os.Lstat(h)
		}
		switch {
		case err != nil && force && errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			fail("cannot remove '%s': %s", p, strerror(err))
			continue
		case fi.IsDir() && !recursive && !dirs:
			fail("cannot remove '%s': Is a directory", p)
			continue
		case fi.IsDir() && recursive:
			err = os.RemoveAll(h)
		default:
			err = os.Remove(h)
		}
		if err != nil {
			fail("cannot remove '%s': %s", p, strerror(err))
		}
	}
	return code
}

// strerror is the C library's message for err's errno ("No such file or
// directory"), as command-line tools print it.
func strerror(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err.Error()
	}
	msg := errno.Error()
	if msg == "" {
		return msg
	}
	return strings.ToUpper(msg[:1]) + msg[1:]
}
