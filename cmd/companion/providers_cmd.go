package main

import (
	"fmt"
	"io"
)

func runProviders(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "companion providers: not available yet")
	return 2
}
