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
	secs, err := Sections(module)
	if err != nil {
		return nil, fmt.Errorf("module %v", err)
	}
	out := make([]byte, 0, len(module)+len(Section)+compact.Len()+16)
	out = append(out, module[:8]...)
	for _, s := range secs {
		if s.ID == 0 && s.Name == Section {
			continue
		}
		out = append(out, module[s.Start:s.End]...)
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
	secs, err := Sections(module)
	if err != nil {
		return nil, fmt.Errorf("module %v", err)
	}
	var found [][]byte
	for _, s := range secs {
		if s.ID == 0 && s.Name == Section {
			found = append(found, s.Payload)
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

// ModuleSection is one top-level section of a WebAssembly core module:
// its id, where it sits in the file, and for a custom section (id 0) its
// name and the bytes after the name. Nothing else is decoded.
type ModuleSection struct {
	ID         byte
	Start, End int // the whole section, id byte included
	Name       string
	Payload    []byte // aliases the file
}

// MaxSections bounds the sections (custom ones included) a module may
// have, so listing them cannot allocate in proportion to a hostile file:
// 32 MiB of empty sections would otherwise cost gigabytes.
const MaxSections = 10_000

// Sections lists a core module's top-level sections. Its errors complete
// the sentence "module ...". The host's validator walks modules with it
// too, so a packer and the host agree on what a module's sections are.
func Sections(b []byte) ([]ModuleSection, error) {
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
	var out []ModuleSection
	for i := 8; i < len(b); {
		if len(out) == MaxSections {
			return nil, fmt.Errorf("has more than %d sections", MaxSections)
		}
		start := i
		id := b[i]
		size, n, err := uleb32(b[i+1:])
		if err != nil {
			return nil, fmt.Errorf("has a malformed size in the section at byte %d: %v", start, err)
		}
		i += 1 + n
		if uint64(i)+uint64(size) > uint64(len(b)) {
			return nil, fmt.Errorf("has a section at byte %d that runs past the end of the file", start)
		}
		s := ModuleSection{ID: id, Start: start, End: i + int(size)}
		if id == 0 {
			body := b[i:s.End]
			nl, n, err := uleb32(body)
			if err != nil || uint64(n)+uint64(nl) > uint64(len(body)) {
				return nil, fmt.Errorf("has a custom section at byte %d with a malformed name", start)
			}
			s.Name = string(body[n : n+int(nl)])
			s.Payload = body[n+int(nl):]
		}
		out = append(out, s)
		i = s.End
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
