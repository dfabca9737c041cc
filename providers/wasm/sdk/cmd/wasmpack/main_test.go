package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canvasapp/companion/providers/wasm/sdk/manifest"
)

const good = `{"name":"acme","version":"1.0.0","abi_version":1,"description":"Acme",
 "upstreams":{"api":{"base_url":"https://api.acme.example"}},"capabilities":{"list":true}}`

func write(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPackAndCheck(t *testing.T) {
	dir := t.TempDir()
	in := write(t, dir, "in.wasm", []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00})
	man := write(t, dir, "manifest.json", []byte(good))
	out := filepath.Join(dir, "out.wasm")
	if err := run(man, out, false, []string{in}); err != nil {
		t.Fatal(err)
	}
	packed, _ := os.ReadFile(out)
	if got, err := manifest.Extract(packed); err != nil || !strings.Contains(string(got), `"name":"acme"`) {
		t.Fatalf("packed module carries %s, %v", got, err)
	}
	if err := run("", "", true, []string{out}); err != nil {
		t.Fatalf("-check of the packed module: %v", err)
	}

	bad := write(t, dir, "bad.json", []byte(strings.Replace(good, `"abi_version":1`, `"abi_version":7`, 1)))
	err := run(bad, out, false, []string{in})
	if err == nil || !strings.Contains(err.Error(), "abi_version") {
		t.Fatalf("a bad manifest packed: %v", err)
	}
	if err := run("", "", true, []string{in}); err == nil || !strings.Contains(err.Error(), "no companion.manifest section") {
		t.Fatalf("-check of an unpacked module: %v", err)
	}
	if err := run("", "", false, []string{in}); !errors.Is(err, errUsage) {
		t.Fatalf("no -manifest: %v", err)
	}
}
