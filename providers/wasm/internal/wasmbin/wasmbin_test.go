package wasmbin

import (
	"strings"
	"testing"
)

// empty is the smallest module: magic and version.
var empty = []byte{0, 'a', 's', 'm', 1, 0, 0, 0}

func TestMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"short":     {0, 'a', 's'},
		"magic":     []byte("\x7fELF\x01\x00\x00\x00"),
		"component": {0, 'a', 's', 'm', 0x0d, 0, 1, 0},
		"truncated": append(append([]byte(nil), empty...), 0, 10, 1, 'x'),
		"bad leb":   append(append([]byte(nil), empty...), 0, 0xff, 0xff, 0xff, 0xff, 0xff),
		"bad name":  append(append([]byte(nil), empty...), 0, 2, 5, 'x'),
	} {
		if _, err := sections(b); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "component" && !strings.Contains(err.Error(), "component") {
			t.Errorf("component: %v", err)
		}
	}
}
