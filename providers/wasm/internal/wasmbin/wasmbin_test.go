package wasmbin

import (
	"bytes"
	"strings"
	"testing"
)

// empty is the smallest module: magic and version.
var empty = []byte{0, 'a', 's', 'm', 1, 0, 0, 0}

func TestSetAndReadCustomSection(t *testing.T) {
	// A type section (id 1) to preserve around the custom one.
	mod := append(append([]byte(nil), empty...), 1, 4, 1, 0x60, 0, 0)
	out, err := SetCustomSection(mod, "companion.manifest", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, mod) {
		t.Fatal("existing sections not preserved")
	}
	secs, err := CustomSections(out, "companion.manifest")
	if err != nil || len(secs) != 1 || string(secs[0]) != `{"a":1}` {
		t.Fatalf("%q %v", secs, err)
	}
	// Setting again replaces, and a large payload needs a multi-byte size.
	big := bytes.Repeat([]byte("x"), 300)
	out, err = SetCustomSection(out, "companion.manifest", big)
	if err != nil {
		t.Fatal(err)
	}
	secs, _ = CustomSections(out, "companion.manifest")
	if len(secs) != 1 || !bytes.Equal(secs[0], big) {
		t.Fatalf("replace failed: %d sections", len(secs))
	}
	if other, _ := CustomSections(out, "name"); len(other) != 0 {
		t.Fatal("found a section that is not there")
	}
}

func TestMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"short":     {0, 'a', 's'},
		"magic":     []byte("\x7fELF\x01\x00\x00\x00"),
		"component": {0, 'a', 's', 'm', 0x0d, 0, 1, 0},
		"truncated": append(append([]byte(nil), empty...), 0, 10, 1, 'x'),
		"bad leb":   append(append([]byte(nil), empty...), 0, 0xff, 0xff, 0xff, 0xff, 0xff),
		"bad name":  append(append([]byte(nil), empty...), 0, 2, 5, 'x'),
	} {
		if _, err := CustomSections(b, "x"); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "component" && !strings.Contains(err.Error(), "component") {
			t.Errorf("component: %v", err)
		}
	}
}
