package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	return ExtractAt(bytes.NewReader(module), int64(len(module)))
}

// ExtractAt is Extract for a module of size bytes read through r. It reads
// the section headers and the manifest only, not the code, so a host can
// learn what a module of megabytes is without reading it.
func ExtractAt(r io.ReaderAt, size int64) ([]byte, error) {
	type span struct{ from, to int }
	var found []span
	err := walk(r, size, func(s ModuleSection, payload int) {
		if s.ID == 0 && s.Name == Section {
			found = append(found, span{payload, s.End})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("module %v", err)
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("module has no %s section: embed its manifest with companion providers pack (see ABI.md)", Section)
	case 1:
		b := make([]byte, found[0].to-found[0].from)
		if _, err := r.ReadAt(b, int64(found[0].from)); err != nil {
			return nil, fmt.Errorf("module: reading its %s section: %v", Section, err)
		}
		return b, nil
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
	var out []ModuleSection
	err := walk(bytes.NewReader(b), int64(len(b)), func(s ModuleSection, payload int) {
		if s.ID == 0 {
			s.Payload = b[payload:s.End]
		}
		out = append(out, s)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// walk calls visit for each top-level section of the module of size bytes
// in r, in order, with where its payload starts (after a custom section's
// name). It reads only the header, the section headers and custom
// sections' names. Its errors complete the sentence "module ...".
func walk(r io.ReaderAt, size int64, visit func(s ModuleSection, payload int)) error {
	var head [8]byte
	if size < 8 || readFull(r, head[:], 0) != nil || !bytes.Equal(head[:4], magic) {
		return errors.New("is not a WebAssembly binary (bad magic number)")
	}
	switch {
	case head[4] == 1 && head[5] == 0 && head[6] == 0 && head[7] == 0:
	case head[6] == 1 && head[7] == 0:
		return errors.New("is a WebAssembly component; companion loads core modules (wasip1) only")
	default:
		return fmt.Errorf("has unsupported WebAssembly binary version %x", head[4:8])
	}
	var buf [6]byte // an id and a size, or a name's length
	for i, n := int64(8), 0; i < size; n++ {
		if n == MaxSections {
			return fmt.Errorf("has more than %d sections", MaxSections)
		}
		start := i
		h := buf[:min(int64(len(buf)), size-i)]
		if err := readFull(r, h, i); err != nil {
			return fmt.Errorf("could not be read at byte %d: %v", start, err)
		}
		id := h[0]
		secSize, k, err := uleb32(h[1:])
		if err != nil {
			return fmt.Errorf("has a malformed size in the section at byte %d: %v", start, err)
		}
		i += 1 + int64(k)
		if uint64(i)+uint64(secSize) > uint64(size) {
			return fmt.Errorf("has a section at byte %d that runs past the end of the file", start)
		}
		s := ModuleSection{ID: id, Start: int(start), End: int(i) + int(secSize)}
		payload := int(i)
		if id == 0 {
			nh := buf[:min(5, int64(secSize))]
			err := readFull(r, nh, i)
			nl, k, lerr := uleb32(nh)
			if err != nil || lerr != nil || uint64(k)+uint64(nl) > uint64(secSize) {
				return fmt.Errorf("has a custom section at byte %d with a malformed name", start)
			}
			name := make([]byte, nl)
			if err := readFull(r, name, i+int64(k)); err != nil {
				return fmt.Errorf("has a custom section at byte %d with a malformed name", start)
			}
			s.Name = string(name)
			payload += k + int(nl)
		}
		visit(s, payload)
		i = int64(s.End)
	}
	return nil
}

// readFull fills b from r at off; a short read is an error.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return err
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
