package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// chmod is "chmod [-R] [-f] [-v] [--] MODE FILE..." for the shell, with
// GNU chmod's modes and messages: MODE is octal ("755", "0644", "4755")
// or symbolic clauses separated by commas ("+x", "a+x", "u+x,g-w",
// "go=r", "u=g", "+X", "u+s", "+t"); a symbolic clause without a who
// leaves the bits the umask masks. -R descends directories without
// following symlinks. resolve maps an operand to its host path.
func chmod(args []string, stderr io.Writer, resolve func(string) (string, error)) int {
	recursive, quiet := false, false
	mode := ""
	var files []string
	opts := true
	for _, a := range args {
		switch {
		case opts && a == "--":
			opts = false
		case opts && len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "Rfv") == "":
			recursive = recursive || strings.Contains(a, "R")
			quiet = quiet || strings.Contains(a, "f")
		case mode == "":
			mode = a
		default:
			files = append(files, a)
		}
	}
	switch {
	case mode == "":
		fmt.Fprint(stderr, "chmod: missing operand\nTry 'chmod --help' for more information.\n")
		return 1
	case len(files) == 0:
		fmt.Fprintf(stderr, "chmod: missing operand after '%s'\nTry 'chmod --help' for more information.\n", mode)
		return 1
	}
	change, ok := parseMode(mode)
	if !ok {
		fmt.Fprintf(stderr, "chmod: invalid mode: '%s'\nTry 'chmod --help' for more information.\n", mode)
		return 1
	}
	mask := uint32(umask().Perm())
	code := 0
	apply := func(h, shown string, fi fs.FileInfo) {
		next := change(unixMode(fi.Mode()), fi.IsDir(), mask)
		if err := os.Chmod(h, goMode(next)); err != nil {
			if !quiet {
				fmt.Fprintf(stderr, "chmod: changing permissions of '%s': %s\n", shown, strerror(err))
			}
			code = 1
		}
	}
	for _, f := range files {
		h, err := resolve(f)
		if err != nil {
			err = syscall.ENOENT
		}
		var fi fs.FileInfo
		if err == nil {
			fi, err = os.Stat(h)
		}
		if err != nil {
			fmt.Fprintf(stderr, "chmod: cannot access '%s': %s\n", f, strerror(err))
			code = 1
			continue
		}
		apply(h, f, fi)
		if !recursive || !fi.IsDir() {
			continue
		}
		filepath.WalkDir(h, func(p string, d fs.DirEntry, err error) error {
			if p == h {
				return nil
			}
			shown := filepath.Join(f, strings.TrimPrefix(p, h+"/"))
			if err != nil {
				fmt.Fprintf(stderr, "chmod: cannot access '%s': %s\n", shown, strerror(err))
				code = 1
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 {
				return nil // neither changed nor followed
			}
			if info, err := d.Info(); err == nil {
				apply(p, shown, info)
			}
			return nil
		})
	}
	return code
}

// Mode bits as chmod(2) takes them.
const (
	sUID = 0o4000
	sGID = 0o2000
	sVTX = 0o1000
)

func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= sUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= sGID
	}
	if m&fs.ModeSticky != 0 {
		u |= sVTX
	}
	return u
}

func goMode(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	if u&sUID != 0 {
		m |= fs.ModeSetuid
	}
	if u&sGID != 0 {
		m |= fs.ModeSetgid
	}
	if u&sVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// modeChange computes a file's new mode from its mode, whether it is a
// directory, and the umask.
type modeChange func(cur uint32, isDir bool, umask uint32) uint32

func parseMode(s string) (modeChange, bool) {
	if s != "" && strings.Trim(s, "01234567") == "" {
		n, err := strconv.ParseUint(s, 8, 32)
		if err != nil || n > 0o7777 {
			return nil, false
		}
		keep := len(s) < 5 // GNU keeps a directory's setuid/setgid for short octal modes
		return func(cur uint32, isDir bool, _ uint32) uint32 {
			next := uint32(n)
			if isDir && keep {
				next |= cur & (sUID | sGID)
			}
			return next
		}, true
	}
	var clauses []modeChange
	for clause := range strings.SplitSeq(s, ",") {
		c, ok := parseClause(clause)
		if !ok {
			return nil, false
		}
		clauses = append(clauses, c)
	}
	return func(cur uint32, isDir bool, umask uint32) uint32 {
		for _, c := range clauses {
			cur = c(cur, isDir, umask)
		}
		return cur
	}, true
}

// parseClause parses one "[ugoa]*([-+=]([rwxXst]*|[ugo]))+".
func parseClause(c string) (modeChange, bool) {
	i := 0
	who := uint32(0)
	for ; i < len(c) && strings.IndexByte("ugoa", c[i]) >= 0; i++ {
		switch c[i] {
		case 'u':
			who |= 0o700 | sUID
		case 'g':
			who |= 0o070 | sGID
		case 'o':
			who |= 0o007 | sVTX
		case 'a':
			who |= 0o777 | sUID | sGID | sVTX
		}
	}
	type action struct {
		op    byte
		perms string
	}
	var actions []action
	for i < len(c) {
		if strings.IndexByte("+-=", c[i]) < 0 {
			return nil, false
		}
		op := c[i]
		i++
		j := i
		if j < len(c) && strings.IndexByte("ugo", c[j]) >= 0 {
			j++
		} else {
			for j < len(c) && strings.IndexByte("rwxXst", c[j]) >= 0 {
				j++
			}
		}
		actions = append(actions, action{op, c[i:j]})
		i = j
	}
	if len(actions) == 0 {
		return nil, false
	}
	return func(cur uint32, isDir bool, umask uint32) uint32 {
		affected, masked := who, uint32(0)
		if who == 0 {
			affected, masked = 0o777|sUID|sGID|sVTX, umask
		}
		for _, a := range actions {
			var bits uint32
			for _, p := range a.perms {
				switch p {
				case 'r':
					bits |= 0o444
				case 'w':
					bits |= 0o222
				case 'x':
					bits |= 0o111
				case 'X':
					if isDir || cur&0o111 != 0 {
						bits |= 0o111
					}
				case 's':
					bits |= sUID | sGID
				case 't':
					bits |= sVTX
				case 'u':
					bits |= copyClass((cur >> 6) & 7)
				case 'g':
					bits |= copyClass((cur >> 3) & 7)
				case 'o':
					bits |= copyClass(cur & 7)
				}
			}
			bits &= affected &^ masked
			switch a.op {
			case '+':
				cur |= bits
			case '-':
				cur &^= bits
			case '=':
				clear := affected &^ masked
				if isDir {
					clear &^= sUID | sGID // GNU keeps a directory's set-id bits on "="
				}
				cur = cur&^clear | bits
			}
		}
		return cur
	}, true
}

// copyClass spreads one class's rwx to all three classes.
func copyClass(rwx uint32) uint32 { return rwx<<6 | rwx<<3 | rwx }
