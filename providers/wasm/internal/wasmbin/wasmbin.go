// Package wasmbin validates a WebAssembly binary against the host's
// limits before it is compiled (validate.go). The manifest's custom
// section is read and written by the SDK's manifest package, which
// packers outside this repository share.
package wasmbin

import (
	"errors"
	"fmt"

	sdkmanifest "github.com/canvasapp/companion/providers/wasm/sdk/manifest"
)

// sections lists b's top-level sections with the SDK's walker, which
// packers share, so the host and they agree on a module's layout.
func sections(b []byte) ([]sdkmanifest.ModuleSection, error) {
	ss, err := sdkmanifest.Sections(b)
	if err != nil {
		return nil, fmt.Errorf("module %w", err)
	}
	return ss, nil
}

func uleb32(b []byte) (uint32, int, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0, errors.New("truncated LEB128")
		}
		c := b[i]
		if i == 4 && c > 0x0f {
			return 0, 0, errors.New("LEB128 overflows 32 bits")
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("LEB128 longer than 5 bytes")
}

func appendUleb(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
