// Package wasmbin validates a WebAssembly binary against the host's
// limits before it is compiled (validate.go). The manifest's custom
// section is read and written by the SDK's manifest package, which
// packers outside this repository share.
package wasmbin

import (
	"bytes"
	"errors"
	"fmt"
)

var magic = []byte{0x00, 0x61, 0x73, 0x6d}

// section is one top-level section: its id and where it sits in the file.
type section struct {
	id         byte
	start, end int // the whole section, id byte included
	name       string
}

// maxSections bounds the sections (custom ones included) a file may have,
// so listing them cannot allocate in proportion to a hostile file.
const maxSections = 10_000

func sections(b []byte) ([]section, error) {
	if len(b) < 8 || !bytes.Equal(b[:4], magic) {
		return nil, errors.New("not a WebAssembly binary (bad magic number)")
	}
	switch {
	case b[4] == 1 && b[5] == 0 && b[6] == 0 && b[7] == 0:
	case b[6] == 1 && b[7] == 0:
		return nil, errors.New("is a WebAssembly component; companion loads core modules (wasip1) only")
	default:
		return nil, fmt.Errorf("unsupported WebAssembly binary version %x", b[4:8])
	}
	var out []section
	for i := 8; i < len(b); {
		if len(out) == maxSections {
			return nil, fmt.Errorf("more than %d sections", maxSections)
		}
		start := i
		id := b[i]
		i++
		size, n, err := uleb32(b[i:])
		if err != nil {
			return nil, fmt.Errorf("section at byte %d: %v", start, err)
		}
		i += n
		if uint64(i)+uint64(size) > uint64(len(b)) {
			return nil, fmt.Errorf("section at byte %d runs past the end of the file", start)
		}
		s := section{id: id, start: start, end: i + int(size)}
		if id == 0 {
			body := b[i:s.end]
			nl, n, err := uleb32(body)
			if err != nil || uint64(n)+uint64(nl) > uint64(len(body)) {
				return nil, fmt.Errorf("custom section at byte %d has a malformed name", start)
			}
			s.name = string(body[n : n+int(nl)])
		}
		out = append(out, s)
		i = s.end
	}
	return out, nil
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
