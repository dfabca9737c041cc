package wasmbin

import (
	"errors"
	"strings"
	"testing"
)

// mod assembles a module from sections given as (id, payload) pairs.
func mod(secs ...[]byte) []byte {
	out := append([]byte(nil), empty...)
	for _, s := range secs {
		out = append(out, s[0])
		out = appendUleb(out, uint32(len(s)-1))
		out = append(out, s[1:]...)
	}
	return out
}

func sec(id byte, payload ...byte) []byte { return append([]byte{id}, payload...) }

func leb(v uint32) []byte { return appendUleb(nil, v) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// One function type () -> (), one function with the given local
// declarations and an empty body.
func withLocals(decls ...[2]uint32) []byte {
	body := leb(uint32(len(decls)))
	for _, d := range decls {
		body = append(append(body, leb(d[0])...), byte(d[1]))
	}
	body = append(body, 0x0b)
	return mod(
		sec(1, 1, 0x60, 0, 0),
		sec(3, 1, 0),
		sec(10, cat([]byte{1}, leb(uint32(len(body))), body)...),
	)
}

func TestValidateLimits(t *testing.T) {
	lim := DefaultLimits
	lim.MemoryPages = 16
	cases := []struct {
		name string
		bin  []byte
		want string // "" means valid
	}{
		{"empty", empty, ""},
		{"locals within the limit", withLocals([2]uint32{5000, 0x7f}, [2]uint32{5000, 0x7e}), ""},
		{"locals summed over declarations", withLocals([2]uint32{6000, 0x7f}, [2]uint32{6000, 0x7e}), "locals of function 0: 12000 locals"},
		{"locals overflowing 32 bits", withLocals([2]uint32{0xffffffff, 0x7f}, [2]uint32{0xffffffff, 0x7f}), "locals of function 0"},
		{"table without maximum", mod(sec(4, 1, 0x70, 0, 5)), ""},
		{"table minimum above the limit", mod(sec(4, cat([]byte{1, 0x70, 0}, leb(200_000))...)), "table 0 minimum: 200000 elements"},
		{"table maximum above the limit", mod(sec(4, cat([]byte{1, 0x70, 1, 0}, leb(200_000))...)), "table 0 maximum"},
		{"tables together above the limit", mod(sec(4, cat([]byte{2, 0x70, 1, 0}, leb(60_000), []byte{0x70, 1, 0}, leb(60_000))...)), "all tables' maxima together"},
		{"too many tables", mod(sec(4, 5)), "tables: 5 entries"},
		{"memory minimum above the manifest", mod(sec(5, 1, 0, 17)), "limits.memory_mib = 1"},
		{"two memories", mod(sec(5, 2, 0, 1, 0, 1)), "memories: 2 entries"},
		{"shared memory", mod(sec(5, 1, 3, 1, 2)), "shared"},
		{"memory64", mod(sec(5, 1, 4, 1)), "64-bit"},
		{"declared count larger than the section", mod(sec(1, cat(leb(9000), []byte{0x60})...)), "cannot fit"},
		{"count above the limit", mod(sec(2, leb(50_000)...)), "imports: 50000 entries"},
		{"truncated LEB128", mod(sec(3, 0x80)), "truncated LEB128"},
		{"LEB128 past 32 bits", mod(sec(3, 0xff, 0xff, 0xff, 0xff, 0x7f)), "overflows 32 bits"},
		{"section twice", mod(sec(1, 0), sec(1, 0)), "appears twice"},
		{"functions without bodies", mod(sec(1, 1, 0x60, 0, 0), sec(3, 1, 0)), "declares 1 functions but has 0 bodies"},
		{"type index out of range", mod(sec(3, 1, 3)), "type index 3"},
		{"export of a missing function", mod(sec(7, 1, 1, 'f', 0, 7)), "function 7, which does not exist"},
		{"leftover bytes", mod(sec(1, 0, 0)), "left over"},
		{"tags", mod(sec(13, 0)), "not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Validate(c.bin, lim)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatal("accepted")
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestCodeSectionAndCustomNameBounded(t *testing.T) {
	lim := DefaultLimits
	lim.CodeBytes = 8
	if _, err := Validate(withLocals([2]uint32{1, 0x7f}, [2]uint32{1, 0x7f}, [2]uint32{1, 0x7f}), lim); err == nil || !strings.Contains(err.Error(), "code section size") {
		t.Fatalf("code section over its limit: %v", err)
	}
	name := strings.Repeat("n", 2000)
	bin := mod(sec(0, cat(leb(uint32(len(name))), []byte(name))...))
	if _, err := Validate(bin, DefaultLimits); err == nil || !strings.Contains(err.Error(), "custom section name: 2000 bytes") {
		t.Fatalf("long custom section name: %v", err)
	}
}

func TestLimitErrorNamesTheLimit(t *testing.T) {
	big := make([]byte, DefaultLimits.ModuleBytes+1)
	copy(big, empty)
	_, err := Validate(big, DefaultLimits)
	var le *LimitError
	if !errors.As(err, &le) || le.What != "module size" || le.Limit != uint64(DefaultLimits.ModuleBytes) {
		t.Fatalf("%v", err)
	}
}

func TestShapeAndCapTables(t *testing.T) {
	// type 0: (i32, i32) -> i64; one import of type 0; one function of
	// type 0, exported as "f"; a table without a maximum; a memory
	// exported as "memory".
	bin := mod(
		sec(1, 1, 0x60, 2, 0x7f, 0x7f, 1, 0x7e),
		sec(2, cat([]byte{1, 1, 'm', 1, 'h', 0}, leb(0))...),
		sec(3, 1, 0),
		sec(4, 1, 0x70, 0, 3),
		sec(5, 1, 0, 1),
		sec(7, 2, 1, 'f', 0, 1, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0),
		sec(10, 1, 4, 0, 0x42, 0, 0x0b),
	)
	s, err := Validate(bin, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Imports) != 1 || s.Imports[0].Module != "m" || string(s.Imports[0].Type.Results) != "\x7e" {
		t.Fatalf("imports %+v", s.Imports)
	}
	if len(s.Exports) != 2 || s.Exports[0].Name != "f" || string(s.Exports[0].Type.Params) != "\x7f\x7f" || s.Exports[1].Kind != 2 {
		t.Fatalf("exports %+v", s.Exports)
	}
	if len(s.Tables) != 1 || s.Tables[0].HasMax || s.Tables[0].Max != DefaultLimits.TableElements {
		t.Fatalf("tables %+v", s.Tables)
	}
	capped, err := CapTables(bin, 1000)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Validate(capped, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.Tables[0].HasMax || s2.Tables[0].Max != 1000 || s2.Tables[0].Min != 3 {
		t.Fatalf("capped tables %+v", s2.Tables)
	}
	if again, _ := CapTables(capped, 1000); &again[0] != &capped[0] {
		t.Fatal("a module whose tables have maxima was rewritten")
	}
}

// FuzzValidate: no input panics, allocates in proportion to a declared
// count, or is accepted while breaking a limit. go test runs the seeds;
// go test -fuzz=FuzzValidate ./providers/wasm/internal/wasmbin explores.
func FuzzValidate(f *testing.F) {
	f.Add(empty)
	f.Add(withLocals([2]uint32{3, 0x7f}))
	f.Add(withLocals([2]uint32{3_000_000, 0x7f}))
	f.Add(mod(sec(4, 1, 0x70, 0, 5)))
	f.Add(mod(sec(4, cat([]byte{1, 0x70, 1, 0}, leb(200_000))...)))
	f.Add(mod(sec(1, cat(leb(0xffffffff), []byte{0x60})...)))
	f.Add(mod(sec(11, 1, 0, 0x41, 0, 0x0b, 3, 'a', 'b', 'c')))
	f.Add(mod(sec(6, 1, 0x7f, 1, 0x41, 0x80, 0x80, 0x04, 0x0b)))
	f.Add(mod(sec(1, 1, 0x60, 2, 0x7f, 0x7f, 1, 0x7e), sec(3, 1, 0), sec(7, 1, 1, 'f', 0, 0), sec(10, 1, 4, 0, 0x42, 0, 0x0b)))
	lim := DefaultLimits
	lim.MemoryPages = 32
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Validate(b, lim)
		if err != nil {
			return
		}
		var sum uint64
		for _, tb := range s.Tables {
			if tb.Max > lim.TableElements || tb.Min > tb.Max {
				t.Fatalf("table %+v accepted", tb)
			}
			sum += uint64(tb.Max)
		}
		if sum > uint64(lim.TableElements) || s.MaxLocals > lim.LocalsPerFunc || s.MaxBody > lim.BodyBytes ||
			s.DataBytes > lim.DataBytes || s.MemoryMin > lim.MemoryPages || uint32(len(s.Imports)) > lim.Imports ||
			uint32(len(s.Exports)) > lim.Exports || s.Functions > lim.Functions {
			t.Fatalf("limits broken by an accepted module: %+v", s)
		}
		capped, err := CapTables(b, lim.TableElements)
		if err != nil {
			t.Fatalf("CapTables failed on a valid module: %v", err)
		}
		s2, err := Validate(capped, lim)
		if err != nil {
			t.Fatalf("capped module invalid: %v", err)
		}
		for _, tb := range s2.Tables {
			if !tb.HasMax {
				t.Fatalf("capped table without maximum: %+v", tb)
			}
		}
	})
}
