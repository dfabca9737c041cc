// Command wasmpack embeds a manifest into a provider module as its
// companion.manifest custom section, after validating it exactly as
// companion does at install:
//
//	wasmpack -manifest manifest.json -o provider.wasm build.wasm
//
// With -check it only validates the manifest (or, given a packed module,
// the manifest inside it) and prints nothing on success. It does the same
// as `companion providers pack` without needing companion itself:
//
//	go run github.com/canvasapp/companion/providers/wasm/sdk/cmd/wasmpack@latest ...
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/canvasapp/companion/providers/wasm/sdk/manifest"
)

func main() {
	manifestPath := flag.String("manifest", "", "manifest JSON file")
	out := flag.String("o", "", "output .wasm (default: overwrite the input)")
	check := flag.Bool("check", false, "only validate")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: wasmpack -manifest manifest.json [-o out.wasm] module.wasm")
		fmt.Fprintln(os.Stderr, "       wasmpack -check (-manifest manifest.json | module.wasm)")
		flag.PrintDefaults()
	}
	flag.Parse()
	err := run(*manifestPath, *out, *check, flag.Args())
	if errors.Is(err, errUsage) {
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasmpack:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(manifestPath, out string, check bool, args []string) error {
	var mjson []byte
	if manifestPath != "" {
		b, err := os.ReadFile(manifestPath)
		if err != nil {
			return err
		}
		mjson = b
	}
	if check {
		if mjson == nil {
			if len(args) != 1 {
				return errUsage
			}
			bin, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			if mjson, err = manifest.Extract(bin); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
		}
		_, err := manifest.Parse(mjson)
		return err
	}
	if mjson == nil || len(args) != 1 {
		return errUsage
	}
	bin, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	packed, err := manifest.Pack(bin, mjson)
	if err != nil {
		return err
	}
	if out == "" {
		out = args[0]
	}
	return os.WriteFile(out, packed, 0o644)
}
