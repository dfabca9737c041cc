package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// printFlags lists fs's flags as README and the usage texts write them,
// with two dashes (the flag package accepts both; its own listing shows
// one).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		line := "  " + dash + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintln(w, line)
		usage = strings.ReplaceAll(usage, "\n", "\n    \t")
		if def := f.DefValue; def != "" && def != "false" && def != "[]" {
			if name == "string" || strings.ContainsAny(def, " \t") {
				def = fmt.Sprintf("%q", def)
			}
			usage += " (default " + def + ")"
		}
		fmt.Fprintln(w, "    \t"+usage)
	})
}
