package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// emptyModule is the smallest valid core module: magic and version.
var emptyModule = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

func manifestJSON(t *testing.T) []byte {
	t.Helper()
	b, err := json.MarshalIndent(base(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPackThenExtract(t *testing.T) {
	// A type section (id 1, one empty func type) must survive packing untouched.
	mod := append(bytes.Clone(emptyModule), 0x01, 0x04, 0x01, 0x60, 0x00, 0x00)
	packed, err := Pack(mod, manifestJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(packed, mod) {
		t.Fatalf("packing changed the module's own sections: % x", packed[:len(mod)])
	}
	got, err := Extract(packed)
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, manifestJSON(t))
	if !bytes.Equal(got, compact.Bytes()) {
		t.Fatalf("extracted %s, want the compacted manifest", got)
	}
	if _, err := Parse(got); err != nil {
		t.Fatalf("the packed manifest no longer parses: %v", err)
	}

	// Packing again replaces the manifest instead of adding a second one.
	again, err := Pack(packed, manifestJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, packed) {
		t.Fatal("repacking is not idempotent")
	}
}

func TestPackRefusesBadInput(t *testing.T) {
	bad := base()
	bad["name"] = "Not A Name"
	badJSON, _ := json.Marshal(bad)
	component := []byte{0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00}
	for _, tc := range []struct {
		name     string
		module   []byte
		manifest []byte
		want     string
	}{
		{"invalid manifest", emptyModule, badJSON, "manifest: name:"},
		{"not wasm", []byte("#!/bin/sh\necho hi\n"), manifestJSON(t), "not a WebAssembly binary"},
		{"component", component, manifestJSON(t), "component"},
		{"truncated section", append(bytes.Clone(emptyModule), 0x01, 0x09, 0x01), manifestJSON(t), "runs past the end"},
		{"bad custom name", append(bytes.Clone(emptyModule), 0x00, 0x01, 0x05), manifestJSON(t), "malformed name"},
		{"too large", make([]byte, MaxModuleBytes+1), manifestJSON(t), fmt.Sprintf("larger than %d MiB", MaxModuleBytes>>20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Pack(tc.module, tc.manifest)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestExtractNeedsExactlyOne(t *testing.T) {
	if _, err := Extract(emptyModule); err == nil || !strings.Contains(err.Error(), "companion providers pack") {
		t.Fatalf("no section: %v", err)
	}
	sec := func(payload string) []byte {
		body := append(appendUleb(nil, uint32(len(Section))), Section...)
		body = append(body, payload...)
		return append(appendUleb([]byte{0}, uint32(len(body))), body...)
	}
	two := append(append(bytes.Clone(emptyModule), sec("{}")...), sec("{}")...)
	if _, err := Extract(two); err == nil || !strings.Contains(err.Error(), "2 companion.manifest sections") {
		t.Fatalf("two sections: %v", err)
	}
}

// A file of 32 MiB of empty sections is refused after the bound, without
// listing them all first (that cost gigabytes).
func TestSectionsBounded(t *testing.T) {
	b := bytes.Clone(emptyModule)
	for len(b) < MaxModuleBytes-1 {
		b = append(b, 1, 0) // an empty type section
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Extract(b)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "more than 10000 sections") {
		t.Fatalf("Extract of %d empty sections: %v, want the section bound", len(b)/2, err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Fatalf("Extract allocated %d MiB for a %d MiB file", n>>20, len(b)>>20)
	}
}

func TestUleb(t *testing.T) {
	for _, v := range []uint32{0, 1, 127, 128, 300, 1 << 21, 1<<32 - 1} {
		b := appendUleb(nil, v)
		got, n, err := uleb32(b)
		if err != nil || got != v || n != len(b) {
			t.Fatalf("%d: got %d, %d, %v", v, got, n, err)
		}
	}
	for _, b := range [][]byte{{0x80}, {0x80, 0x80, 0x80, 0x80, 0x80}, {0xff, 0xff, 0xff, 0xff, 0x1f}} {
		if _, _, err := uleb32(b); err == nil {
			t.Fatalf("% x decoded", b)
		}
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r    *bytes.Reader
	read int
}

func (c *countingReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(b, off)
	c.read += n
	return n, err
}

// TestExtractAtReadsHeadersOnly: the manifest comes out of a module with
// a megabyte of code and a large custom section, as from Extract, while
// reading no more than the section headers, names and the manifest.
func TestExtractAtReadsHeadersOnly(t *testing.T) {
	code := make([]byte, 1<<20)
	mod := append(bytes.Clone(emptyModule), 0x0a) // a code section (id 10)
	mod = appendUleb(mod, uint32(len(code)))
	mod = append(mod, code...)
	names := append(appendUleb(nil, 4), "name"...)
	names = append(names, make([]byte, 256<<10)...)
	mod = append(mod, 0x00)
	mod = appendUleb(mod, uint32(len(names)))
	mod = append(mod, names...)
	packed, err := Pack(mod, manifestJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Extract(packed)
	if err != nil {
		t.Fatal(err)
	}
	c := &countingReader{r: bytes.NewReader(packed)}
	got, err := ExtractAt(c, int64(len(packed)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("ExtractAt = %s, want %s", got, want)
	}
	if c.read > len(want)+64 {
		t.Fatalf("ExtractAt read %d bytes of a %d-byte module for a %d-byte manifest", c.read, len(packed), len(want))
	}
	// Errors are Extract's: a truncated file, no manifest.
	for _, b := range [][]byte{packed[:len(packed)-3], mod} {
		_, errAt := ExtractAt(bytes.NewReader(b), int64(len(b)))
		_, err := Extract(b)
		if errAt == nil || err == nil || errAt.Error() != err.Error() {
			t.Errorf("ExtractAt error %v, Extract error %v: want the same error", errAt, err)
		}
	}
}
