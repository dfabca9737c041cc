// Command wasmpack embeds a manifest into a provider module as its
// companion.manifest custom section, after validating it:
//
//	wasmpack -manifest manifest.json -o provider.wasm build.wasm
//
// With -check it only validates the manifest (or, given a packed module,
// the manifest inside it) and prints nothing on success.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/canvasapp/companion/providers/wasm"
)

func main() {
	manifest := flag.String("manifest", "", "manifest JSON file")
	out := flag.String("o", "", "output .wasm (default: overwrite the input)")
	check := flag.Bool("check", false, "only validate")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: wasmpack -manifest manifest.json [-o out.wasm] module.wasm")
		fmt.Fprintln(os.Stderr, "       wasmpack -check (-manifest manifest.json | module.wasm)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*manifest, *out, *check, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "wasmpack:", err)
		os.Exit(1)
	}
}

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
				return fmt.Errorf("-check needs -manifest or one module")
			}
			bin, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			if mjson, err = wasm.ManifestJSON(bin); err != nil {
				return err
			}
		}
		return wasm.ValidateManifest(mjson)
	}
	if mjson == nil || len(args) != 1 {
		flag.Usage()
		os.Exit(2)
	}
	bin, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	packed, err := wasm.Pack(bin, mjson)
	if err != nil {
		return err
	}
	if out == "" {
		out = args[0]
	}
	return os.WriteFile(out, packed, 0o644)
}
