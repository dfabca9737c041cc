package sdk

import (
	"errors"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// A small JSON codec for the op envelope. Under the host's
// close-on-context-done every loop iteration and Go function entry in the
// module costs an exit to the host (~25 ns), which makes reflection-based
// encoding/json the bulk of a call; this codec does the same job in a
// fraction of the steps. encoding/json stays in use where the shape is
// the author's (request and response bodies).

// --- encoding ---

type encoder struct{ b []byte }

func (e *encoder) raw(s string) { e.b = append(e.b, s...) }

// plain8 reports whether 8 bytes need no escaping: no control
// character, quote, backslash or non-ASCII byte. Checking a word at a time
// saves loop iterations, which are what costs inside the sandbox.
func plain8(s string) bool {
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	zero := func(y uint64) uint64 { return (y - lo) & ^y & hi }
	return (x&hi)|((x-0x20*lo) & ^x & hi)|zero(x^('"'*lo))|zero(x^('\\'*lo)) == 0
}

func (e *encoder) str(s string) {
	e.b = append(e.b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plain8(s[i:]) {
			i += 8
			continue
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
		}
		e.b = append(e.b, s[start:i]...)
		switch c {
		case '"':
			e.b = append(e.b, '\\', '"')
		case '\\':
			e.b = append(e.b, '\\', '\\')
		case '\n':
			e.b = append(e.b, '\\', 'n')
		case '\r':
			e.b = append(e.b, '\\', 'r')
		case '\t':
			e.b = append(e.b, '\\', 't')
		default:
			if c < 0x20 {
				const hex = "0123456789abcdef"
				e.b = append(e.b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else { // invalid UTF-8
				e.b = append(e.b, `\ufffd`...)
			}
		}
		i++
		start = i
	}
	e.b = append(e.b, s[start:]...)
	e.b = append(e.b, '"')
}

// field writes ,"key": (the comma unless first).
func (e *encoder) field(first bool, key string) {
	if !first {
		e.b = append(e.b, ',')
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, key...)
	e.b = append(e.b, '"', ':')
}

func (e *encoder) strField(first *bool, key, v string) {
	if v == "" {
		return
	}
	e.field(*first, key)
	*first = false
	e.str(v)
}

func (e *encoder) timeField(first *bool, key string, t time.Time) {
	if t.IsZero() {
		return
	}
	e.field(*first, key)
	*first = false
	e.b = append(e.b, '"')
	e.b = appendRFC3339(e.b, t)
	e.b = append(e.b, '"')
}

// appendRFC3339 is time.RFC3339Nano in UTC without the generic layout
// machinery.
func appendRFC3339(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	if y < 0 || y > 9999 {
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+mo/10), byte('0'+mo%10), '-', byte('0'+d/10), byte('0'+d%10), 'T',
		byte('0'+h/10), byte('0'+h%10), ':', byte('0'+mi/10), byte('0'+mi%10), ':', byte('0'+s/10), byte('0'+s%10))
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i >= 1; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, 'Z')
}

func (e *encoder) strMap(m map[string]string) {
	e.b = append(e.b, '{')
	first := true
	for k, v := range m {
		e.field2(first, k)
		first = false
		e.str(v)
	}
	e.b = append(e.b, '}')
}

// field2 is field for keys that may need escaping.
func (e *encoder) field2(first bool, key string) {
	if !first {
		e.b = append(e.b, ',')
	}
	e.str(key)
	e.b = append(e.b, ':')
}

func (e *encoder) box(b *Box) {
	e.raw(`{"id":`)
	e.str(b.ID)
	e.raw(`,"state":`)
	st := b.State
	if st == "" {
		st = Unknown
	}
	e.str(string(st))
	first := false
	e.strField(&first, "name", b.Name)
	e.strField(&first, "url", b.URL)
	e.strField(&first, "key", b.Key)
	if len(b.Labels) > 0 {
		e.field(false, "labels")
		e.strMap(b.Labels)
	}
	e.timeField(&first, "created_at", b.CreatedAt)
	e.timeField(&first, "paused_at", b.PausedAt)
	e.timeField(&first, "last_activity_at", b.LastActivityAt)
	if s := b.Size; s != nil {
		e.raw(`,"size":{"bytes":`)
		e.b = strconv.AppendInt(e.b, s.Bytes, 10)
		e.raw(`,"source":`)
		e.str(s.Source)
		f := false
		e.timeField(&f, "at", s.At)
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, '}')
}

func (e *encoder) caps(c *Capabilities) {
	flags := [...]struct {
		k string
		v bool
	}{
		{"list", c.List}, {"last_activity", c.LastActivity}, {"suspend", c.Suspend},
		{"suspend_keeps_files", c.SuspendKeepsFiles}, {"suspend_keeps_memory", c.SuspendKeepsMemory},
		{"resume_same_identity", c.ResumeSameIdentity}, {"delete", c.Delete},
		{"native_idle_pause", c.NativeIdlePause}, {"native_paused_ttl", c.NativePausedTTL},
	}
	e.b = append(e.b, '{')
	for i, f := range flags {
		e.field(i == 0, f.k)
		e.b = strconv.AppendBool(e.b, f.v)
	}
	e.b = append(e.b, '}')
}

func (e *encoder) errorEnvelope(x *Error) {
	e.raw(`{"error":{"kind":`)
	e.str(string(x.Kind))
	e.raw(`,"message":`)
	e.str(x.Message)
	if x.RetryAfter > 0 {
		e.raw(`,"retry_after":`)
		e.b = strconv.AppendFloat(e.b, x.RetryAfter.Seconds(), 'f', -1, 64)
	}
	e.raw(`}}`)
}

// --- decoding ---

var errSyntax = errors.New("invalid JSON")

type decoder struct {
	s string
	i int
}

func (d *decoder) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.s) {
		return d.s[d.i]
	}
	return 0
}

func (d *decoder) expect(c byte) error {
	if d.peek() != c {
		return errSyntax
	}
	d.i++
	return nil
}

// object calls fn for each member of an object; fn must consume the value.
func (d *decoder) object(fn func(key string) error) error {
	if d.peek() == 'n' {
		return d.null()
	}
	if err := d.expect('{'); err != nil {
		return err
	}
	if d.peek() == '}' {
		d.i++
		return nil
	}
	for {
		key, err := d.str()
		if err != nil {
			return err
		}
		if err := d.expect(':'); err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil
		default:
			return errSyntax
		}
	}
}

func (d *decoder) null() error {
	d.ws()
	if len(d.s)-d.i >= 4 && d.s[d.i:d.i+4] == "null" {
		d.i += 4
		return nil
	}
	return errSyntax
}

func (d *decoder) str() (string, error) {
	if d.peek() != '"' {
		return "", errSyntax
	}
	d.i++
	start := d.i
	for d.i < len(d.s) {
		c := d.s[d.i]
		if c == '"' {
			s := d.s[start:d.i]
			d.i++
			return s, nil
		}
		if c == '\\' {
			return d.slowStr(start)
		}
		if c < 0x20 {
			return "", errSyntax
		}
		d.i++
	}
	return "", errSyntax
}

func (d *decoder) slowStr(start int) (string, error) {
	b := []byte(d.s[start:d.i])
	for d.i < len(d.s) {
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return string(b), nil
		case c < 0x20:
			return "", errSyntax
		case c != '\\':
			b = append(b, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.s) {
			return "", errSyntax
		}
		esc := d.s[d.i+1]
		d.i += 2
		switch esc {
		case '"', '\\', '/':
			b = append(b, esc)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", errSyntax
			}
			if r >= 0xd800 && r < 0xdc00 && d.i+1 < len(d.s) && d.s[d.i] == '\\' && d.s[d.i+1] == 'u' {
				d.i += 2
				lo, ok := d.hex4()
				if !ok {
					return "", errSyntax
				}
				r = (r-0xd800)<<10 | (lo - 0xdc00) + 0x10000
				if lo < 0xdc00 || lo > 0xdfff {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", errSyntax
		}
	}
	return "", errSyntax
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(d.s[d.i:d.i+4], 16, 32)
	d.i += 4
	return rune(n), err == nil
}

func (d *decoder) number() (float64, error) {
	d.ws()
	start := d.i
	for d.i < len(d.s) {
		c := d.s[d.i]
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			d.i++
			continue
		}
		break
	}
	f, err := strconv.ParseFloat(d.s[start:d.i], 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, errSyntax
	}
	return f, nil
}

func (d *decoder) int() (int64, error) {
	f, err := d.number()
	return int64(f), err
}

func (d *decoder) strMap() (map[string]string, error) {
	m := map[string]string{}
	err := d.object(func(k string) error {
		v, err := d.str()
		m[k] = v
		return err
	})
	return m, err
}

// skip consumes any value.
func (d *decoder) skip() error {
	switch c := d.peek(); {
	case c == '{':
		return d.object(func(string) error { return d.skip() })
	case c == '[':
		d.i++
		if d.peek() == ']' {
			d.i++
			return nil
		}
		for {
			if err := d.skip(); err != nil {
				return err
			}
			switch d.peek() {
			case ',':
				d.i++
			case ']':
				d.i++
				return nil
			default:
				return errSyntax
			}
		}
	case c == '"':
		_, err := d.str()
		return err
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if len(d.s)-d.i >= len(lit) && d.s[d.i:d.i+len(lit)] == lit {
				d.i += len(lit)
				return nil
			}
		}
		return errSyntax
	default:
		_, err := d.number()
		return err
	}
}

// parseInput decodes the op input (ABI.md "Ops"); unknown members are
// skipped so newer hosts may add some.
func parseInput(s string) (inputJSON, error) {
	var in inputJSON
	d := &decoder{s: s}
	err := d.object(func(k string) (err error) {
		switch k {
		case "deadline_unix_ms":
			in.DeadlineUnixMS, err = d.int()
		case "box_id":
			in.BoxID, err = d.str()
		case "account":
			in.Account = &accountJSON{}
			err = d.object(func(k string) (err error) {
				switch k {
				case "id":
					in.Account.ID, err = d.str()
				case "config":
					in.Account.Config, err = d.strMap()
				default:
					err = d.skip()
				}
				return err
			})
		case "spec":
			sp := &specJSON{}
			in.Spec = sp
			err = d.object(func(k string) (err error) {
				switch k {
				case "workspace_id":
					sp.WorkspaceID, err = d.str()
				case "name":
					sp.Name, err = d.str()
				case "options":
					sp.Options, err = d.strMap()
				case "labels":
					sp.Labels, err = d.strMap()
				case "lifecycle":
					err = d.object(func(k string) (err error) {
						switch k {
						case "idle_pause_after_seconds":
							sp.Lifecycle.IdlePauseAfterSeconds, err = d.int()
						case "paused_ttl_seconds":
							sp.Lifecycle.PausedTTLSeconds, err = d.int()
						default:
							err = d.skip()
						}
						return err
					})
				default:
					err = d.skip()
				}
				return err
			})
		default:
			err = d.skip()
		}
		return err
	})
	if err == nil && d.peek() != 0 {
		err = errSyntax
	}
	if err != nil {
		return inputJSON{}, errors.New("invalid JSON near byte " + strconv.Itoa(d.i))
	}
	return in, nil
}
