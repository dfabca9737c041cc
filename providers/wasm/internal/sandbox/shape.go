package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/providers/wasm/internal/wasmbin"
	"github.com/canvasapp/companion/providers/wasm/internal/wire"
)

// Value type codes of the binary format.
const (
	vtI32 = 0x7f
	vtI64 = 0x7e
)

// Binary limits of a module with these manifest limits (ABI.md, Limits).
func binLimits(l manifest.Limits) wasmbin.Limits {
	lim := wasmbin.DefaultLimits
	lim.MemoryPages = l.MemoryPages()
	return lim
}

// Checked is a module that passed Check: its shape, and its bytes with
// table maxima filled in, ready to compile.
type Checked struct {
	Shape *wasmbin.Shape
	Bin   []byte
	Has   map[string]bool // ops the module exports
}

// Check validates a module's binary against the limits and its imports
// and exports against ABI v1, without compiling or running anything.
func Check(bin []byte, l manifest.Limits) (*Checked, error) {
	lim := binLimits(l)
	shape, err := wasmbin.Validate(bin, lim)
	if err != nil {
		return nil, err
	}
	has, err := checkShape(shape)
	if err != nil {
		return nil, err
	}
	capped, err := wasmbin.CapTables(bin, lim.TableElements)
	if err != nil {
		return nil, err
	}
	return &Checked{Shape: shape, Bin: capped, Has: has}, nil
}

func typeNames(ts []byte) string {
	out := make([]string, len(ts))
	for i, t := range ts {
		switch t {
		case vtI32:
			out[i] = "i32"
		case vtI64:
			out[i] = "i64"
		case 0x7d:
			out[i] = "f32"
		case 0x7c:
			out[i] = "f64"
		default:
			out[i] = fmt.Sprintf("%#x", t)
		}
	}
	return "(" + strings.Join(out, ", ") + ")"
}

func sigString(ft wasmbin.FuncType) string {
	return typeNames(ft.Params) + " -> " + typeNames(ft.Results)
}

// checkShape refuses a module whose imports or exports do not fit ABI v1,
// with a message that says what to change, and returns the ops exported.
func checkShape(s *wasmbin.Shape) (map[string]bool, error) {
	httpSig := wasmbin.FuncType{Params: []byte{vtI32, vtI32}, Results: []byte{vtI32}}
	for _, im := range s.Imports {
		switch {
		case im.Kind == 2:
			return nil, errors.New("module imports a memory; it must define and export its own as \"memory\"")
		case im.Kind != 0:
			return nil, fmt.Errorf("module imports %s.%s, which is not a function; companion provides functions only (see ABI.md)", im.Module, im.Name)
		case im.Module == wire.WASIModule:
		case im.Module == wire.ImportModule:
			if im.Name != wire.ImportHTTP && im.Name != wire.ImportHTTPResult {
				return nil, fmt.Errorf("module imports %s.%s, which companion does not provide (ABI.md lists the imports)", im.Module, im.Name)
			}
			if sigString(im.Type) != sigString(httpSig) {
				return nil, fmt.Errorf("module imports %s.%s as %s; it is (i32, i32) -> i32", im.Module, im.Name, sigString(im.Type))
			}
		default:
			return nil, fmt.Errorf("module imports %s.%s; companion provides only %q and %q (see ABI.md)", im.Module, im.Name, wire.ImportModule, wire.WASIModule)
		}
	}
	funcs := map[string]wasmbin.FuncType{}
	memory := false
	for _, ex := range s.Exports {
		switch ex.Kind {
		case 0:
			funcs[ex.Name] = ex.Type
		case 2:
			memory = memory || ex.Name == wire.ExportMemory
		}
	}
	if !memory {
		return nil, errors.New("module does not export its memory as \"memory\"")
	}
	if _, ok := funcs[wire.ExportABIVersion]; !ok {
		if _, cmd := funcs["_start"]; cmd {
			return nil, fmt.Errorf("module is a command (it exports _start) without %s; build a reactor (Go: -buildmode=c-shared) with the SDK", wire.ExportABIVersion)
		}
		return nil, fmt.Errorf("module does not export %s: it is not a companion provider module (see ABI.md)", wire.ExportABIVersion)
	}
	want := map[string]wasmbin.FuncType{
		wire.ExportABIVersion: {Results: []byte{vtI32}},
		wire.ExportAlloc:      {Params: []byte{vtI32}, Results: []byte{vtI32}},
		wire.ExportFree:       {Params: []byte{vtI32}},
	}
	for _, op := range wire.Ops {
		want[wire.OpExport(op)] = wasmbin.FuncType{Params: []byte{vtI32, vtI32}, Results: []byte{vtI64}}
	}
	for name, w := range want {
		got, ok := funcs[name]
		if ok && sigString(got) != sigString(w) {
			return nil, fmt.Errorf("export %s has signature %s; ABI v1 wants %s", name, sigString(got), sigString(w))
		}
	}
	for _, name := range []string{wire.ExportAlloc, wire.ExportFree, wire.OpExport(wire.OpDescribe), wire.OpExport(wire.OpList)} {
		if _, ok := funcs[name]; !ok {
			return nil, fmt.Errorf("module does not export %s, which every module must (see ABI.md)", name)
		}
	}
	has := map[string]bool{}
	for _, op := range wire.Ops {
		_, has[op] = funcs[wire.OpExport(op)]
	}
	return has, nil
}

// CheckCapabilities refuses capability flags the module's exports cannot
// back.
func (c *Checked) CheckCapabilities(caps core.Capabilities) error { return checkCaps(c.Has, caps) }
