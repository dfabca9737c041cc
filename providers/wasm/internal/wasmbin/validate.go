package wasmbin

import (
	"errors"
	"fmt"
)

// Limits bound what a module may declare, so that nothing in a module can
// make the compiler or the runtime allocate more than the host budgets for
// it. Every count is checked before anything proportional to it is
// allocated.
type Limits struct {
	ModuleBytes     int    // the whole file
	Types           uint32 // entries of the type section
	Params          uint32 // parameters plus results of one function type
	Imports         uint32
	Exports         uint32
	Functions       uint32 // functions the module defines
	Globals         uint32
	Tables          uint32 // tables, imported or defined
	TableElements   uint32 // the declared maximum of each table, and their sum
	LocalsPerFunc   uint64 // the locals one function declares (sum of its declarations)
	BodyBytes       uint32 // one function body
	CodeBytes       uint32 // the code section: what the compiler works through
	DataBytes       uint64 // all data segments together
	DataSegments    uint32
	ElementBytes    uint32 // the element section
	GlobalBytes     uint32 // the global section
	MemoryPages     uint32 // the memory's minimum (the runtime caps growth)
	CustomNameBytes uint32 // a custom section's name
	ExportNameBytes uint32 // one import or export name
	Sections        int    // sections in the file, custom ones included
}

// DefaultLimits are the limits ABI.md documents. MemoryPages is filled
// in from each module's manifest.
var DefaultLimits = Limits{
	ModuleBytes:     32 << 20,
	Types:           10_000,
	Params:          1_000,
	Imports:         1_000,
	Exports:         1_000,
	Functions:       100_000,
	Globals:         10_000,
	Tables:          4,
	TableElements:   100_000,
	LocalsPerFunc:   10_000,
	BodyBytes:       256 << 10,
	CodeBytes:       8 << 20,
	DataBytes:       16 << 20,
	DataSegments:    100_000,
	ElementBytes:    1 << 20,
	GlobalBytes:     1 << 20,
	MemoryPages:     65536,
	CustomNameBytes: 1024,
	ExportNameBytes: 1024,
	Sections:        1_000,
}

// FuncType is a function signature, value types as their binary codes
// (0x7f i32, 0x7e i64, 0x7d f32, 0x7c f64, ...).
type FuncType struct {
	Params, Results []byte
}

// Import is one import. Type is set for functions.
type Import struct {
	Module, Name string
	Kind         byte // 0 func, 1 table, 2 memory, 3 global, 4 tag
	Type         FuncType
}

// Export is one export. Type is set for functions.
type Export struct {
	Name string
	Kind byte
	Type FuncType
}

// Table is one table's limits. Max is the effective maximum: the limit
// when the module declares none (HasMax false).
type Table struct {
	Min    uint32
	Max    uint32
	HasMax bool
}

// Shape is what Validate learnt about a module: enough to check its
// imports and exports against the ABI without compiling it.
type Shape struct {
	Imports   []Import
	Exports   []Export
	Tables    []Table
	Memories  int
	MemoryMin uint32 // pages
	Functions uint32 // defined, not imported
	MaxLocals uint64 // the most locals one function declares
	MaxBody   uint32
	DataBytes uint64
}

// TableBytes is what the runtime allocates for the tables at their
// declared maxima (one 8-byte reference per element).
func (s *Shape) TableBytes() uint64 {
	var n uint64
	for _, t := range s.Tables {
		n += uint64(t.Max) * 8
	}
	return n
}

// LimitError says which limit a module breaks.
type LimitError struct {
	What  string // e.g. "locals of function 12"
	Value uint64
	Limit uint64
	Unit  string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %d %s, above the limit of %d %s (see ABI.md, Limits)", e.What, e.Value, e.Unit, e.Limit, e.Unit)
}

func over(what string, v, limit uint64, unit string) error {
	return &LimitError{What: what, Value: v, Limit: limit, Unit: unit}
}

// reader walks a byte slice; every read is bounds-checked and errors name
// the byte offset in the file.
type reader struct {
	b    []byte
	i    int
	base int // offset of b in the file
}

func (r *reader) fail(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", r.base+r.i, fmt.Sprintf(format, args...))
}

func (r *reader) done() bool { return r.i >= len(r.b) }

func (r *reader) byte() (byte, error) {
	if r.i >= len(r.b) {
		return 0, r.fail("unexpected end of section")
	}
	c := r.b[r.i]
	r.i++
	return c, nil
}

func (r *reader) u32() (uint32, error) {
	v, n, err := uleb32(r.b[r.i:])
	if err != nil {
		return 0, r.fail("%v", err)
	}
	r.i += n
	return v, nil
}

// count reads a vector length and refuses one above limit, or one that
// could not fit in what is left of the section at minSize bytes per entry.
func (r *reader) count(what string, limit uint32, minSize int) (uint32, error) {
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if n > limit {
		return 0, over(what, uint64(n), uint64(limit), "entries")
	}
	if uint64(n)*uint64(minSize) > uint64(len(r.b)-r.i) {
		return 0, r.fail("%s: %d entries cannot fit in the %d bytes left", what, n, len(r.b)-r.i)
	}
	return n, nil
}

func (r *reader) bytes(n uint32) ([]byte, error) {
	if uint64(n) > uint64(len(r.b)-r.i) {
		return nil, r.fail("length %d runs past the end of the section", n)
	}
	out := r.b[r.i : r.i+int(n)]
	r.i += int(n)
	return out, nil
}

func (r *reader) name(limit uint32) (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	if n > limit {
		return "", over("a name", uint64(n), uint64(limit), "bytes")
	}
	b, err := r.bytes(n)
	return string(b), err
}

func (r *reader) limits(what string, allowShared bool) (min, max uint32, hasMax bool, err error) {
	flag, err := r.byte()
	if err != nil {
		return
	}
	switch flag {
	case 0x00:
	case 0x01:
		hasMax = true
	case 0x02, 0x03:
		if !allowShared {
			err = r.fail("%s: unknown limits flag %#x", what, flag)
			return
		}
		err = r.fail("%s is shared; companion runs single-threaded modules only", what)
		return
	default:
		err = r.fail("%s: 64-bit or unknown limits (flag %#x) are not supported", what, flag)
		return
	}
	if min, err = r.u32(); err != nil {
		return
	}
	if hasMax {
		if max, err = r.u32(); err != nil {
			return
		}
		if max < min {
			err = r.fail("%s: maximum %d is below minimum %d", what, max, min)
		}
	}
	return
}

func validValType(t byte) bool {
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return true
	}
	return false
}

// Validate checks a module's structure against lim without compiling it,
// and returns its shape. It decodes the sections that decide what the
// runtime allocates (types, imports, functions, tables, memories, globals,
// exports, elements, code, data) far enough to bound them; it does not
// validate instructions, which the compiler does afterwards.
func Validate(b []byte, lim Limits) (*Shape, error) {
	if len(b) > lim.ModuleBytes {
		return nil, over("module size", uint64(len(b)), uint64(lim.ModuleBytes), "bytes")
	}
	ss, err := sections(b)
	if err != nil {
		return nil, err
	}
	if len(ss) > lim.Sections {
		return nil, over("sections", uint64(len(ss)), uint64(lim.Sections), "entries")
	}
	v := &validator{lim: lim, shape: &Shape{}}
	seen := map[byte]bool{}
	for _, s := range ss {
		if s.ID == 0 {
			if len(s.Name) > int(lim.CustomNameBytes) {
				return nil, over("custom section name", uint64(len(s.Name)), uint64(lim.CustomNameBytes), "bytes")
			}
			continue
		}
		if seen[s.ID] {
			return nil, fmt.Errorf("section %d at byte %d appears twice", s.ID, s.Start)
		}
		seen[s.ID] = true
		body := b[s.Start:s.End]
		// Skip the id and the size to reach the payload.
		_, n, _ := uleb32(body[1:])
		r := &reader{b: body[1+n:], base: s.Start + 1 + n}
		if err := v.section(s.ID, r); err != nil {
			return nil, fmt.Errorf("%s section: %w", sectionName(s.ID), err)
		}
		if !r.done() && s.ID != 12 {
			return nil, fmt.Errorf("%s section: %d bytes left over at its end", sectionName(s.ID), len(r.b)-r.i)
		}
	}
	if v.codeCount != v.shape.Functions {
		return nil, fmt.Errorf("the module declares %d functions but has %d bodies", v.shape.Functions, v.codeCount)
	}
	return v.shape, nil
}

func sectionName(id byte) string {
	names := [...]string{"custom", "type", "import", "function", "table", "memory", "global", "export", "start", "element", "code", "data", "data count", "tag"}
	if int(id) < len(names) {
		return names[id]
	}
	return fmt.Sprintf("unknown (%d)", id)
}

type validator struct {
	lim       Limits
	shape     *Shape
	types     []FuncType
	funcTypes []uint32 // type index of every function, imported first
	codeCount uint32
	tableSum  uint64
}

func (v *validator) section(id byte, r *reader) error {
	switch id {
	case 1:
		return v.typeSection(r)
	case 2:
		return v.importSection(r)
	case 3:
		return v.functionSection(r)
	case 4:
		n, err := r.count("tables", v.lim.Tables, 3)
		if err != nil {
			return err
		}
		for i := uint32(0); i < n; i++ {
			if err := v.table(r, fmt.Sprintf("table %d", i)); err != nil {
				return err
			}
		}
	case 5:
		n, err := r.count("memories", 1, 2)
		if err != nil {
			return err
		}
		for i := uint32(0); i < n; i++ {
			if err := v.memory(r); err != nil {
				return err
			}
		}
	case 6:
		if uint32(len(r.b)) > v.lim.GlobalBytes {
			return over("global section size", uint64(len(r.b)), uint64(v.lim.GlobalBytes), "bytes")
		}
		n, err := r.count("globals", v.lim.Globals, 3)
		if err != nil {
			return err
		}
		for i := uint32(0); i < n; i++ {
			if err := v.globalType(r); err != nil {
				return err
			}
			if err := constExpr(r); err != nil {
				return err
			}
		}
	case 7:
		return v.exportSection(r)
	case 8:
		_, err := r.u32()
		return err
	case 9:
		if uint32(len(r.b)) > v.lim.ElementBytes {
			return over("element section size", uint64(len(r.b)), uint64(v.lim.ElementBytes), "bytes")
		}
		r.i = len(r.b) // bounded by its size; the compiler decodes it
	case 10:
		return v.codeSection(r)
	case 11:
		return v.dataSection(r)
	case 12:
		_, err := r.u32()
		return err
	case 13:
		return errors.New("exception tags are not supported")
	default:
		return errors.New("unknown section id")
	}
	return nil
}

func (v *validator) typeSection(r *reader) error {
	n, err := r.count("function types", v.lim.Types, 3)
	if err != nil {
		return err
	}
	v.types = make([]FuncType, 0, n)
	for i := uint32(0); i < n; i++ {
		form, err := r.byte()
		if err != nil {
			return err
		}
		if form != 0x60 {
			return r.fail("type %d is not a function type (form %#x)", i, form)
		}
		var ft FuncType
		for _, dst := range []*[]byte{&ft.Params, &ft.Results} {
			k, err := r.count(fmt.Sprintf("parameters of type %d", i), v.lim.Params, 1)
			if err != nil {
				return err
			}
			ts, _ := r.bytes(k)
			for _, t := range ts {
				if !validValType(t) {
					return r.fail("type %d: unknown value type %#x", i, t)
				}
			}
			*dst = ts
		}
		v.types = append(v.types, ft)
	}
	return nil
}

func (v *validator) funcType(r *reader, idx uint32) (FuncType, error) {
	if idx >= uint32(len(v.types)) {
		return FuncType{}, r.fail("type index %d is out of range (%d types)", idx, len(v.types))
	}
	return v.types[idx], nil
}

func (v *validator) importSection(r *reader) error {
	n, err := r.count("imports", v.lim.Imports, 4)
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		var im Import
		if im.Module, err = r.name(v.lim.ExportNameBytes); err != nil {
			return err
		}
		if im.Name, err = r.name(v.lim.ExportNameBytes); err != nil {
			return err
		}
		if im.Kind, err = r.byte(); err != nil {
			return err
		}
		what := fmt.Sprintf("import %s.%s", im.Module, im.Name)
		switch im.Kind {
		case 0:
			idx, err := r.u32()
			if err != nil {
				return err
			}
			if im.Type, err = v.funcType(r, idx); err != nil {
				return err
			}
			v.funcTypes = append(v.funcTypes, idx)
		case 1:
			if err := v.table(r, what); err != nil {
				return err
			}
		case 2:
			if err := v.memory(r); err != nil {
				return err
			}
		case 3:
			if err := v.globalType(r); err != nil {
				return err
			}
		default:
			return r.fail("%s has unsupported kind %d", what, im.Kind)
		}
		v.shape.Imports = append(v.shape.Imports, im)
	}
	return nil
}

func (v *validator) functionSection(r *reader) error {
	n, err := r.count("functions", v.lim.Functions, 1)
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		idx, err := r.u32()
		if err != nil {
			return err
		}
		if _, err := v.funcType(r, idx); err != nil {
			return err
		}
		v.funcTypes = append(v.funcTypes, idx)
	}
	v.shape.Functions = n
	return nil
}

func (v *validator) table(r *reader, what string) error {
	t, err := r.byte()
	if err != nil {
		return err
	}
	if t != 0x70 && t != 0x6f {
		return r.fail("%s: unknown element type %#x", what, t)
	}
	if len(v.shape.Tables) >= int(v.lim.Tables) {
		return over("tables", uint64(len(v.shape.Tables)+1), uint64(v.lim.Tables), "entries")
	}
	min, max, hasMax, err := r.limits(what, false)
	if err != nil {
		return err
	}
	if min > v.lim.TableElements {
		return over(what+" minimum", uint64(min), uint64(v.lim.TableElements), "elements")
	}
	if !hasMax {
		// Capped like a memory without a maximum: Go's linker declares
		// none, so refusing would refuse every Go module. CapTables
		// writes the cap into the binary before it is compiled.
		max = v.lim.TableElements
	}
	if max > v.lim.TableElements {
		return over(what+" maximum", uint64(max), uint64(v.lim.TableElements), "elements")
	}
	v.tableSum += uint64(max)
	if v.tableSum > uint64(v.lim.TableElements) {
		return over("all tables' maxima together", v.tableSum, uint64(v.lim.TableElements), "elements")
	}
	v.shape.Tables = append(v.shape.Tables, Table{Min: min, Max: max, HasMax: hasMax})
	return nil
}

func (v *validator) memory(r *reader) error {
	v.shape.Memories++
	if v.shape.Memories > 1 {
		return errors.New("more than one memory")
	}
	min, _, _, err := r.limits("memory", true)
	if err != nil {
		return err
	}
	if min > v.lim.MemoryPages {
		return fmt.Errorf("module needs more memory than its manifest allows: its memory starts at %d KiB, above limits.memory_mib = %d", uint64(min)*64, v.lim.MemoryPages/16)
	}
	v.shape.MemoryMin = min
	return nil
}

func (v *validator) globalType(r *reader) error {
	t, err := r.byte()
	if err != nil {
		return err
	}
	if !validValType(t) {
		return r.fail("global of unknown type %#x", t)
	}
	m, err := r.byte()
	if err != nil {
		return err
	}
	if m > 1 {
		return r.fail("global mutability %#x", m)
	}
	return nil
}

func (v *validator) exportSection(r *reader) error {
	n, err := r.count("exports", v.lim.Exports, 3)
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		var ex Export
		if ex.Name, err = r.name(v.lim.ExportNameBytes); err != nil {
			return err
		}
		if ex.Kind, err = r.byte(); err != nil {
			return err
		}
		idx, err := r.u32()
		if err != nil {
			return err
		}
		if ex.Kind == 0 {
			// The function section comes before exports, so every
			// function's type is known here.
			if idx >= uint32(len(v.funcTypes)) {
				return r.fail("export %q names function %d, which does not exist", ex.Name, idx)
			}
			ex.Type = v.types[v.funcTypes[idx]]
		}
		v.shape.Exports = append(v.shape.Exports, ex)
	}
	return nil
}

func (v *validator) codeSection(r *reader) error {
	if uint64(len(r.b)) > uint64(v.lim.CodeBytes) {
		return over("code section size", uint64(len(r.b)), uint64(v.lim.CodeBytes), "bytes")
	}
	n, err := r.count("function bodies", v.lim.Functions, 2)
	if err != nil {
		return err
	}
	v.codeCount = n
	for i := uint32(0); i < n; i++ {
		size, err := r.u32()
		if err != nil {
			return err
		}
		what := fmt.Sprintf("function %d", i)
		if size > v.lim.BodyBytes {
			return over("body of "+what, uint64(size), uint64(v.lim.BodyBytes), "bytes")
		}
		body, err := r.bytes(size)
		if err != nil {
			return err
		}
		br := &reader{b: body, base: r.base + r.i - int(size)}
		decls, err := br.count("local declarations of "+what, v.lim.BodyBytes, 2)
		if err != nil {
			return err
		}
		var locals uint64
		for j := uint32(0); j < decls; j++ {
			c, err := br.u32()
			if err != nil {
				return err
			}
			t, err := br.byte()
			if err != nil {
				return err
			}
			if !validValType(t) {
				return br.fail("%s: local of unknown type %#x", what, t)
			}
			locals += uint64(c)
			if locals > v.lim.LocalsPerFunc {
				return over("locals of "+what, locals, v.lim.LocalsPerFunc, "locals")
			}
		}
		v.shape.MaxLocals = max(v.shape.MaxLocals, locals)
		v.shape.MaxBody = max(v.shape.MaxBody, size)
	}
	return nil
}

func (v *validator) dataSection(r *reader) error {
	n, err := r.count("data segments", v.lim.DataSegments, 2)
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		flag, err := r.u32()
		if err != nil {
			return err
		}
		switch flag {
		case 0:
			err = constExpr(r)
		case 1:
		case 2:
			if _, err = r.u32(); err == nil {
				err = constExpr(r)
			}
		default:
			return r.fail("data segment %d: unknown flag %d", i, flag)
		}
		if err != nil {
			return err
		}
		size, err := r.u32()
		if err != nil {
			return err
		}
		if _, err := r.bytes(size); err != nil {
			return err
		}
		v.shape.DataBytes += uint64(size)
		if v.shape.DataBytes > v.lim.DataBytes {
			return over("data segments together", v.shape.DataBytes, v.lim.DataBytes, "bytes")
		}
	}
	return nil
}

// constExpr skips a constant expression: a few instructions and end.
func constExpr(r *reader) error {
	for steps := 0; steps < 64; steps++ {
		op, err := r.byte()
		if err != nil {
			return err
		}
		switch op {
		case 0x0b: // end
			return nil
		case 0x41, 0x42: // i32.const, i64.const (signed LEB128)
			if err := skipLEB(r, 10); err != nil {
				return err
			}
		case 0x23, 0xd2: // global.get, ref.func
			if _, err := r.u32(); err != nil {
				return err
			}
		case 0x43:
			_, err = r.bytes(4)
		case 0x44:
			_, err = r.bytes(8)
		case 0xd0: // ref.null
			_, err = r.byte()
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
		default:
			return r.fail("unsupported instruction %#x in a constant expression", op)
		}
		if err != nil {
			return err
		}
	}
	return r.fail("constant expression too long")
}

func skipLEB(r *reader, maxBytes int) error {
	for i := 0; i < maxBytes; i++ {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return r.fail("LEB128 longer than %d bytes", maxBytes)
}

// CapTables returns b with every defined table that declares no maximum
// given limit as its maximum, so table.grow cannot allocate past it. b is
// returned unchanged when every table has one. Call it after Validate.
func CapTables(b []byte, limit uint32) ([]byte, error) {
	ss, err := sections(b)
	if err != nil {
		return nil, err
	}
	for _, s := range ss {
		if s.ID != 4 {
			continue
		}
		_, n, _ := uleb32(b[s.Start+1:])
		r := &reader{b: b[s.Start+1+n : s.End], base: s.Start + 1 + n}
		count, err := r.u32()
		if err != nil {
			return nil, err
		}
		body := appendUleb(nil, count)
		changed := false
		for i := uint32(0); i < count; i++ {
			t, err := r.byte()
			if err != nil {
				return nil, err
			}
			min, m, hasMax, err := r.limits("table", false)
			if err != nil {
				return nil, err
			}
			if !hasMax {
				m, changed = max(min, limit), true
			}
			body = append(body, t, 0x01)
			body = appendUleb(appendUleb(body, min), m)
		}
		if !changed {
			return b, nil
		}
		out := make([]byte, 0, len(b)+8*int(count))
		out = append(out, b[:s.Start]...)
		out = append(out, 4)
		out = appendUleb(out, uint32(len(body)))
		out = append(out, body...)
		return append(out, b[s.End:]...), nil
	}
	return b, nil
}
