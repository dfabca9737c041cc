package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// rm is the box's rm: "rm [-r] [-f] [--] PATH...". With -r a directory
// goes with everything below it; without -f a missing path is an error.
// It exits 1 on any error, after trying every path.
func rm(args []string, stderr io.Writer) int {
	force, recursive := false, false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		a := args[0]
		args = args[1:]
		if a == "--" {
			break
		}
		for _, c := range a[1:] {
			switch c {
			case 'f':
				force = true
			case 'r', 'R':
				recursive = true
			default:
				fmt.Fprintf(stderr, "rm: unknown option -%c\n", c)
				return 2
			}
		}
	}
	code := 0
	for _, p := range args {
		fi, err := os.Lstat(p)
		if err != nil {
			if !force || !os.IsNotExist(err) {
				fmt.Fprintf(stderr, "rm: %v\n", err)
				code = 1
			}
			continue
		}
		if fi.IsDir() && !recursive {
			fmt.Fprintf(stderr, "rm: %s: is a directory\n", p)
			code = 1
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			fmt.Fprintf(stderr, "rm: %v\n", err)
			code = 1
		}
	}
	return code
}
