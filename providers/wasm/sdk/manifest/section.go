package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Section is the name of the custom section that carries a module's
// manifest JSON. One file, and so one SHA-256, covers code and manifest.
const Section = "companion.manifest"

// MaxModuleBytes bounds a module file, packed or not.
const MaxModuleBytes = 32 << 20

// Pack validates manifestJSON and returns a copy of module with it as the
// module's only companion.manifest custom section (appended at the end;
// earlier ones are dropped). The manifest is stored compacted, otherwise
// exactly as given.
func Pack(module, manifestJSON []byte) ([]byte, error) {
	if len(module) > MaxModuleBytes {
		return nil, fmt.Errorf("module is larger than %d MiB", MaxModuleBytes>>20)
	}
	if _, err := Parse(manifestJSON); err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, manifestJSON); err != nil {
		return nil, fmt.Errorf("manifest: %v", err)
	}
	secs, err := sections(module)
	if err != nil {
		return nil, fmt.Errorf("module %v", err)
	}
	out := make([]byte, 0, len(module)+len(Section)+compact.Len()+16)
	out = append(out, module[:8]...)
	for _, s := range secs {
		if s.custom && s.name == Section {
			continue
		}
		out = append(out, module[s.start:s.end]...)
	}
	body := appendUleb(nil, uint32(len(Section)))
	body = append(body, Section...)
	body = append(body, compact.Bytes()...)
	out = append(out, 0)
	out = appendUleb(out, uint32(len(body)))
	return append(out, body...), nil
}

// Extract returns the manifest JSON embedded in module, unvalidated (Parse
// validates it). A module must carry exactly one.
func Extract(module []byte) ([]byte, error) {
	secs, err := sections(module)
	if err != nil {
		return nil, fmt.Errorf("module %v", err)
	}
	var found [][]byte
	for _, s := range secs {
		if s.custom && s.name == Section {
			found = append(found, s.payload)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("module has no %s section: embed its manifest with companion providers pack (see ABI.md)", Section)
	case 1:
		return bytes.Clone(found[0]), nil
	}
	return nil, fmt.Errorf("module has %d %s sections; it must have exactly one", len(found), Section)
}

var magic = []byte{0x00, 0x61, 0x73, 0x6d}

// section is one top-level section of a binary; only custom sections are
// looked into, the rest is copied as bytes.
type section struct {
	start, end int // the whole section, id byte included
	custom     bool
	name       string
	payload    []byte
}

// maxSections bounds the sections a file may have (the host's validator
// has the same bound), so listing them cannot allocate in proportion to a
// hostile file: 32 MiB of empty sections would otherwise cost gigabytes.
const maxSections = 10_000

func sections(b []byte) ([]section, error) {
	if len(b) < 8 || !bytes.Equal(b[:4], magic) {
		return nil, errors.New("is not a WebAssembly binary (bad magic number)")
	}
	switch {
	case b[4] == 1 && b[5] == 0 && b[6] == 0 && b[7] == 0:
	case b[6] == 1 && b[7] == 0:
		return nil, errors.New("is a WebAssembly component; companion loads core modules (wasip1) only")
	default:
		return nil, fmt.Errorf("has unsupported WebAssembly binary version %x", b[4:8])
	}
	var out []section
	for i := 8; i < len(b); {
		if len(out) == maxSections {
			return nil, fmt.Errorf("has more than %d sections", maxSections)
		}
		start := i
		id := b[i]
		size, n, err := uleb32(b[i+1:])
		if err != nil {
			return nil, fmt.Errorf("section at byte %d: %v", start, err)
		}
		i += 1 + n
		if uint64(i)+uint64(size) > uint64(len(b)) {
			return nil, fmt.Errorf("section at byte %d runs past the end of the file", start)
		}
		s := section{start: start, end: i + int(size), custom: id == 0}
		if s.custom {
			body := b[i:s.end]
			nl, n, err := uleb32(body)
			if err != nil || uint64(n)+uint64(nl) > uint64(len(body)) {
				return nil, fmt.Errorf("custom section at byte %d has a malformed name", start)
			}
			s.name = string(body[n : n+int(nl)])
			s.payload = body[n+int(nl):]
		}
		out = append(out, s)
		i = s.end
	}
	return out, nil
}

// uleb32 decodes an unsigned LEB128 of at most 32 bits.
func uleb32(b []byte) (uint32, int, error) {
	var v uint32
	for i := 0; i < 5 && i < len(b); i++ {
		c := b[i]
		if i == 4 && c > 0x0f {
			return 0, 0, errors.New("LEB128 overflows 32 bits")
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	if len(b) < 5 {
		return 0, 0, errors.New("truncated LEB128")
	}
	return 0, 0, errors.New("LEB128 longer than 5 bytes")
}

func appendUleb(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
