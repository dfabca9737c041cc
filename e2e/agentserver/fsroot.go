package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// fsRoot maps the absolute paths a request names, as the box sees them,
// to paths on this machine. In a real box (and in the box image) the two
// are the same. With EMULATOR_FS_ROOT=DIR a host-run emulator behaves as if
// DIR were the box's "/": "/workspace/x" is DIR/workspace/x, and paths the
// emulator answers with are written back without DIR.
type fsRoot struct {
	dir string // symlink-free absolute directory; "" means no mapping
}

// errOutside is a path that leads out of the root through ".." or a
// symlink. Routes answer it as they answer a missing path.
var errOutside = errors.New("path leads outside EMULATOR_FS_ROOT")

func newFSRoot(dir string) (fsRoot, error) {
	if dir == "" {
		return fsRoot{}, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fsRoot{}, fmt.Errorf("EMULATOR_FS_ROOT=%q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fsRoot{}, fmt.Errorf("EMULATOR_FS_ROOT=%q: %w", dir, err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return fsRoot{}, fmt.Errorf("EMULATOR_FS_ROOT=%q is not a directory", dir)
	}
	if real == "/" {
		return fsRoot{}, nil
	}
	return fsRoot{dir: real}, nil
}

// mapped reports whether a root is set.
func (r fsRoot) mapped() bool { return r.dir != "" }

// host maps an absolute box path to the host path to operate on. Without
// a root it is the path itself, untouched, so the OS resolves it as the
// real server's would. With a root, ".." is taken lexically and every
// symlink in the part that exists is resolved (a dangling last one is
// followed to where it would create a file); a result outside the root is
// errOutside.
func (r fsRoot) host(box string) (string, error) {
	if !r.mapped() {
		return box, nil
	}
	return r.resolve(filepath.Join(r.dir, box), 0)
}

// lhost is host for an operation on the path's last component itself
// (rm, mkdir, lstat): symlinks are resolved in its directory, not in it.
func (r fsRoot) lhost(box string) (string, error) {
	if !r.mapped() {
		return box, nil
	}
	box = filepath.Clean(box)
	base := filepath.Base(box)
	if base == "/" || base == "." || base == ".." {
		return r.host(box)
	}
	dir, err := r.host(filepath.Dir(box))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, base), nil
}

func (r fsRoot) resolve(h string, depth int) (string, error) {
	if depth > 40 {
		return "", &fs.PathError{Op: "resolve", Path: h, Err: syscall.ELOOP}
	}
	if !r.within(h) {
		return "", errOutside
	}
	real, err := filepath.EvalSymlinks(h)
	if err == nil {
		if !r.within(real) {
			return "", errOutside
		}
		return real, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		// A component is not a directory, or cannot be searched: the
		// operation itself fails with the OS's own error.
		return h, nil
	}
	parent, err := r.resolve(filepath.Dir(h), depth+1)
	if err != nil {
		return "", err
	}
	h = filepath.Join(parent, filepath.Base(h))
	if fi, err := os.Lstat(h); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(h)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(parent, target)
		}
		return r.resolve(filepath.Clean(target), depth+1)
	}
	return h, nil
}

func (r fsRoot) within(h string) bool {
	return h == r.dir || strings.HasPrefix(h, r.dir+"/")
}

// box writes a host path as the box sees it.
func (r fsRoot) box(h string) string {
	if !r.mapped() {
		return h
	}
	if h == r.dir {
		return "/"
	}
	if rest, ok := strings.CutPrefix(h, r.dir+"/"); ok {
		return "/" + rest
	}
	return h
}
