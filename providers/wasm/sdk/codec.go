package sdk

import (
	"errors"
	"math"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
)

// A small JSON codec for the op envelope. Under the host's
// close-on-context-done every loop iteration, taken branch and function
// entry of Go code in the module costs an exit to the host (~40 ns), so
// the cost of a call is roughly the number of jumps it takes. Reflection
// (encoding/json) would be most of a call; this codec does the same job in
// few jumps: strings are scanned eight bytes at a time, numbers are parsed
// eight digits at a time, object keys are matched as machine words, and
// times are formatted without the generic layout code. encoding/json stays
// in use where the shape is the author's (request and response bodies).

// Word-at-a-time helpers. A word holds 8 bytes, the first in the low byte.
const (
	lsb   = 0x0101010101010101
	msb   = 0x8080808080808080
	low7  = 0x7f7f7f7f7f7f7f7f
	hiNib = 0xf0f0f0f0f0f0f0f0
)

// zeroBytes has the top bit of the lowest zero byte of x set, and no bit
// below it (higher bytes may be flagged wrongly; only the lowest is used).
func zeroBytes(x uint64) uint64 { return (x - lsb) &^ x & msb }

// nonzeroBytes has the top bit of exactly the non-zero bytes of x set.
func nonzeroBytes(x uint64) uint64 { return ((x & low7) + low7 | x) & msb }

// firstByte is the index of the lowest flagged byte of a mask made by the
// functions above, or 8 when none is.
func firstByte(m uint64) int { return bits.TrailingZeros64(m) >> 3 }

// lowBytes masks the n lowest bytes of a word (n is clamped to 0..8).
func lowBytes(n int) uint64 {
	n = max(0, min(n, 8))
	return ^uint64(0) >> (64 - 8*uint(n)) // a shift by 64 gives 0
}

// load8 reads the 8 bytes at p as a word. The caller guarantees that they
// are inside one allocation.
func load8(p unsafe.Pointer) uint64 { return *(*uint64)(p) }

// --- decoding ---

// pad is how many readable zero bytes follow every string the decoder
// reads from, so that it may always load whole words.
const pad = 16

// padded copies b into a new buffer followed by pad zero bytes and returns
// the copy as a string. Strings parsed from it alias it, which is safe:
// the buffer is never reused.
func padded(b []byte) string {
	buf := make([]byte, len(b)+pad)
	copy(buf, b)
	return unsafe.String(unsafe.SliceData(buf), len(b))
}

// decoder reads JSON from s, which must come from padded (or another
// allocation with pad readable bytes after it). Errors are sticky: after
// the first one every read returns zero values.
type decoder struct {
	s   string
	i   int
	bad bool
}

func (d *decoder) fail() { d.bad, d.i = true, len(d.s) }

// at returns a pointer to s[i]; i may be up to len(s).
func (d *decoder) at(i int) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(unsafe.StringData(d.s)), i)
}

// peek skips white space and returns the next byte, or 0 at the end.
func (d *decoder) peek() byte {
	if d.i < len(d.s) {
		if c := d.s[d.i]; c > ' ' {
			return c
		}
	}
	return d.peekSlow()
}

func (d *decoder) peekSlow() byte {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return d.s[d.i]
		}
	}
	return 0
}

// quoteOrControl flags '"', '\\' and control bytes: the bytes that end the
// fast scan of a string. The zero padding after the input counts as
// control bytes, so the scan always stops.
func quoteOrControl(x uint64) uint64 {
	return zeroBytes(x^(lsb*'"')) | zeroBytes(x^(lsb*'\\')) | (x-lsb*0x20)&^x&msb
}

// str reads a string. Without escapes it is a substring of the input.
func (d *decoder) str() string {
	if d.peek() != '"' {
		d.fail()
		return ""
	}
	start := d.i + 1
	i := start
	for {
		m := quoteOrControl(load8(d.at(i)))
		if m != 0 {
			i += firstByte(m)
			break
		}
		i += 8
	}
	if i < len(d.s) && d.s[i] == '"' {
		d.i = i + 1
		return d.s[start:i]
	}
	d.i = i
	return d.slowStr(start)
}

// slowStr finishes a string with escapes from s[start:]; d.i is at the
// first byte that needs a look. The result is padded like the input.
func (d *decoder) slowStr(start int) string {
	b := []byte(d.s[start:d.i])
	for d.i < len(d.s) {
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return padded(b)
		case c < 0x20:
			d.fail()
			return ""
		case c != '\\':
			b = append(b, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.s) {
			break
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
				d.fail()
				return ""
			}
			if r >= 0xd800 && r < 0xdc00 && d.i+1 < len(d.s) && d.s[d.i] == '\\' && d.s[d.i+1] == 'u' {
				d.i += 2
				lo, ok := d.hex4()
				if !ok {
					d.fail()
					return ""
				}
				r = (r-0xd800)<<10 | (lo - 0xdc00) + 0x10000
				if lo < 0xdc00 || lo > 0xdfff {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			d.fail()
			return ""
		}
	}
	d.fail()
	return ""
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(d.s[d.i:d.i+4], 16, 32)
	d.i += 4
	return rune(n), err == nil
}

// key is an object key as words, for matching without a byte loop.
type key struct {
	n      int
	w0, w1 uint64
}

// keyOf is the key form of s, which must be padded.
func keyOf(s string) key {
	if s == "" {
		return key{}
	}
	p := unsafe.Pointer(unsafe.StringData(s))
	return key{
		n:  len(s),
		w0: load8(p) & lowBytes(len(s)),
		w1: load8(unsafe.Add(p, 8)) & lowBytes(len(s)-8),
	}
}

// mkKey is keyOf for constants (at init; any string).
func mkKey(s string) key { return keyOf(padded([]byte(s))) }

// is reports whether k, read as keyOf(s), is the constant c. Keys longer
// than 16 bytes also compare their tails.
func is(k key, s string, c key, cs string) bool {
	return k == c && (c.n <= 16 || s[16:] == cs[16:])
}

// openObject consumes '{' and reports true, or consumes null and reports
// false (an absent object).
func (d *decoder) openObject() bool {
	switch d.peek() {
	case '{':
		d.i++
		return true
	case 'n':
		d.null()
	default:
		d.fail()
	}
	return false
}

// member reads the next member's key and colon. It returns false after
// the closing brace (or on an error).
func (d *decoder) member(first bool) (string, bool) {
	c := d.peek()
	if c == '}' {
		d.i++
		return "", false
	}
	if !first {
		if c != ',' {
			d.fail()
			return "", false
		}
		d.i++
	}
	k := d.str()
	if d.peek() != ':' {
		d.fail()
		return "", false
	}
	d.i++
	return k, !d.bad
}

func (d *decoder) null() {
	d.peek()
	if len(d.s)-d.i >= 4 && d.s[d.i:d.i+4] == "null" {
		d.i += 4
		return
	}
	d.fail()
}

// digits parses the run of ASCII digits at the start of x (at most 8): it
// returns their count and value.
func digits(x uint64) (n int, v uint64) {
	// A byte is a digit when its high nibble is 3 both as is and plus 6
	// (0x30..0x39). A carry out of a byte >= 0xfa only disturbs bytes
	// above a non-digit, which are not counted.
	nd := ((x & hiNib) ^ (lsb * 0x30)) | (((x + lsb*6) & hiNib) ^ (lsb * 0x30))
	n = firstByte(nonzeroBytes(nd))
	if n == 0 {
		return 0, 0
	}
	// Shift the digits to the top, so the bytes below read as leading
	// zeros, and combine pairs, quads and octets.
	x = (x << (64 - 8*uint(n))) & (lsb * 0x0f)
	x = (x * (10<<8 + 1)) >> 8 & 0x00ff00ff00ff00ff
	x = (x * (100<<16 + 1)) >> 16 & 0x0000ffff0000ffff
	x = (x * (10000<<32 + 1)) >> 32
	return n, x
}

var pow10 = [9]uint64{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000}

// int reads a number as an int64. Plain integers of up to 18 digits take
// the fast path; anything else is parsed as a float and truncated.
func (d *decoder) int() int64 {
	d.peek()
	i, neg := d.i, false
	if i < len(d.s) && d.s[i] == '-' {
		i, neg = i+1, true
	}
	var v uint64
	total := 0
	for {
		n, part := digits(load8(d.at(i)))
		v = v*pow10[n] + part
		i += n
		total += n
		if n < 8 || total > 18 {
			break
		}
	}
	if total == 0 || total > 18 || i < len(d.s) && (d.s[i] == '.' || d.s[i]|0x20 == 'e') {
		f := d.number()
		return int64(f)
	}
	d.i = i
	if neg {
		return -int64(v)
	}
	return int64(v)
}

func (d *decoder) number() float64 {
	d.peek()
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
		d.fail()
		return 0
	}
	return f
}

// strMap reads an object of strings (null is an empty map).
func (d *decoder) strMap() map[string]string {
	m := map[string]string{}
	if !d.openObject() {
		return m
	}
	for first := true; ; first = false {
		k, ok := d.member(first)
		if !ok {
			break
		}
		m[k] = d.str()
	}
	return m
}

// skip consumes any value.
func (d *decoder) skip(depth int) {
	if depth > 100 {
		d.fail()
		return
	}
	switch c := d.peek(); {
	case c == '{':
		d.i++
		for first := true; ; first = false {
			if _, ok := d.member(first); !ok {
				return
			}
			d.skip(depth + 1)
		}
	case c == '[':
		d.i++
		if d.peek() == ']' {
			d.i++
			return
		}
		for !d.bad {
			d.skip(depth + 1)
			switch d.peek() {
			case ',':
				d.i++
			case ']':
				d.i++
				return
			default:
				d.fail()
			}
		}
	case c == '"':
		d.str()
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if len(d.s)-d.i >= len(lit) && d.s[d.i:d.i+len(lit)] == lit {
				d.i += len(lit)
				return
			}
		}
		d.fail()
	default:
		d.number()
	}
}

// The input members, as keys.
const (
	sDeadline = "deadline_unix_ms"
	sAccount  = "account"
	sBoxID    = "box_id"
	sSpec     = "spec"
	sID       = "id"
	sConfig   = "config"
	sWS       = "workspace_id"
	sName     = "name"
	sOptions  = "options"
	sLabels   = "labels"
	sLife     = "lifecycle"
	sIdle     = "idle_pause_after_seconds"
	sTTL      = "paused_ttl_seconds"
	sAgentKey = "agent_key"
)

var (
	kDeadline = mkKey(sDeadline)
	kAccount  = mkKey(sAccount)
	kBoxID    = mkKey(sBoxID)
	kSpec     = mkKey(sSpec)
	kID       = mkKey(sID)
	kConfig   = mkKey(sConfig)
	kWS       = mkKey(sWS)
	kName     = mkKey(sName)
	kOptions  = mkKey(sOptions)
	kLabels   = mkKey(sLabels)
	kLife     = mkKey(sLife)
	kIdle     = mkKey(sIdle)
	kTTL      = mkKey(sTTL)
	kAgentKey = mkKey(sAgentKey)
)

// parseInput decodes the op input (ABI.md "Ops"); unknown members are
// skipped so newer hosts may add some. The strings it returns share one
// private copy of input.
func parseInput(input []byte) (inputJSON, error) {
	var in inputJSON
	d := &decoder{s: padded(input)}
	if d.openObject() {
		for first := true; ; first = false {
			k, ok := d.member(first)
			if !ok {
				break
			}
			switch kk := keyOf(k); {
			case kk == kDeadline:
				in.DeadlineUnixMS = d.int()
			case kk == kAccount:
				d.account(&in)
			case kk == kBoxID:
				in.BoxID = d.str()
			case kk == kSpec:
				d.spec(&in)
			default:
				d.skip(0)
			}
		}
	}
	if d.peek(); d.i < len(d.s) {
		d.fail()
	}
	if d.bad {
		return inputJSON{}, errors.New("invalid JSON near byte " + strconv.Itoa(min(d.i, len(input))))
	}
	return in, nil
}

func (d *decoder) account(in *inputJSON) {
	if !d.openObject() {
		return
	}
	for first := true; ; first = false {
		k, ok := d.member(first)
		if !ok {
			return
		}
		switch kk := keyOf(k); {
		case kk == kID:
			in.Account.ID = d.str()
		case kk == kConfig:
			in.Account.Config = d.strMap()
		default:
			d.skip(0)
		}
	}
}

func (d *decoder) spec(in *inputJSON) {
	if !d.openObject() {
		return
	}
	sp := &specJSON{}
	in.Spec = sp
	for first := true; ; first = false {
		k, ok := d.member(first)
		if !ok {
			return
		}
		switch kk := keyOf(k); {
		case kk == kWS:
			sp.WorkspaceID = d.str()
		case kk == kName:
			sp.Name = d.str()
		case kk == kOptions:
			sp.Options = d.strMap()
		case kk == kLabels:
			sp.Labels = d.strMap()
		case kk == kAgentKey:
			sp.AgentKey = d.str()
		case kk == kLife:
			if !d.openObject() {
				continue
			}
			for first := true; ; first = false {
				k, ok := d.member(first)
				if !ok {
					break
				}
				switch kk := keyOf(k); {
				case is(kk, k, kIdle, sIdle):
					sp.Lifecycle.IdlePauseAfterSeconds = d.int()
				case is(kk, k, kTTL, sTTL):
					sp.Lifecycle.PausedTTLSeconds = d.int()
				default:
					d.skip(0)
				}
			}
		default:
			d.skip(0)
		}
	}
}

// --- encoding ---

// encoder holds the JSON an op writes. The append functions below keep
// the buffer in a local variable while they work: every store of a slice
// through a pointer is a write-barrier check, and so a jump.
type encoder struct{ b []byte }

func (e *encoder) raw(s string) { e.b = append(e.b, s...) }

// needsEscape flags '"', '\\', control bytes and non-ASCII bytes.
func needsEscape(x uint64) uint64 {
	return zeroBytes(x^(lsb*'"')) | zeroBytes(x^(lsb*'\\')) | (x-lsb*0x20)&^x&msb | x&msb
}

// appendStr appends s quoted. It copies s and then checks the copy a word
// at a time (reading up to 8 bytes past it, inside the capacity it made
// sure of); only a string that needs escapes or has non-ASCII bytes to
// validate takes the byte loop.
func appendStr(b []byte, s string) []byte {
	n := len(s)
	start := len(b)
	if cap(b)-start < n+2+8 {
		b = grow(b, n+2+8)
	}
	b = b[:start+n+2]
	copy(b[start+1:], s)
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), start+1)
	m := needsEscape(load8(p)) & lowBytes(n)
	for i := 8; i < n; i += 8 {
		m |= needsEscape(load8(unsafe.Add(p, i))) & lowBytes(n-i)
	}
	if m != 0 {
		return appendStrSlow(b[:start], s)
	}
	b[start] = '"'
	b[start+n+1] = '"'
	return b
}

func grow(b []byte, n int) []byte {
	nb := make([]byte, len(b), max(2*cap(b), len(b)+n, 512))
	copy(nb, b)
	return nb
}

func appendStrSlow(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
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
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < 0x20 {
				const hex = "0123456789abcdef"
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else { // invalid UTF-8
				b = append(b, `\ufffd`...)
			}
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendTime appends key (the member name with its comma and colon) and t
// in RFC 3339. Callers skip zero times themselves: the check inlines, the
// call would not.
func appendTime(b []byte, key string, t time.Time) []byte {
	b = append(b, key...)
	b = append(b, '"')
	b = appendRFC3339(b, t)
	return append(b, '"')
}

// appendRFC3339 is time.RFC3339Nano in UTC, computed from the Unix time
// with a few divisions instead of the generic calendar code.
func appendRFC3339(b []byte, t time.Time) []byte {
	secs := t.Unix()
	// Days since 1970-01-01 and seconds into the day (floored).
	days := secs / 86400
	sod := secs - days*86400
	if sod < 0 {
		days--
		sod += 86400
	}
	// Civil date from days (Howard Hinnant's algorithm, proleptic
	// Gregorian, eras of 400 years from 0000-03-01).
	z := days + 719468
	if z < 0 || z >= 146097*25 { // outside 0000..9999: the generic code
		return t.UTC().AppendFormat(b, time.RFC3339Nano)
	}
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	y := yoe + era*400
	if m > 12 {
		m -= 12
		y++
	}
	if y > 9999 {
		return t.UTC().AppendFormat(b, time.RFC3339Nano)
	}
	h, mi, s := sod/3600, sod/60%60, sod%60
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+m/10), byte('0'+m%10), '-', byte('0'+d/10), byte('0'+d%10), 'T',
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

func appendStrMap(b []byte, m map[string]string) []byte {
	b = append(b, '{')
	first := true
	for k, v := range m {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendStr(b, k)
		b = append(b, ':')
		b = appendStr(b, v)
	}
	return append(b, '}')
}

func appendBox(b []byte, x *Box) []byte {
	b = append(b, `{"id":`...)
	b = appendStr(b, x.ID)
	b = append(b, `,"state":`...)
	if x.State == "" {
		b = append(b, `"unknown"`...)
	} else {
		b = appendStr(b, string(x.State))
	}
	if x.Name != "" {
		b = append(b, `,"name":`...)
		b = appendStr(b, x.Name)
	}
	if x.URL != "" {
		b = append(b, `,"url":`...)
		b = appendStr(b, x.URL)
	}
	if x.Key != "" {
		b = append(b, `,"key":`...)
		b = appendStr(b, x.Key)
	}
	if len(x.Labels) > 0 {
		b = append(b, `,"labels":`...)
		b = appendStrMap(b, x.Labels)
	}
	if !x.CreatedAt.IsZero() {
		b = appendTime(b, `,"created_at":`, x.CreatedAt)
	}
	if !x.PausedAt.IsZero() {
		b = appendTime(b, `,"paused_at":`, x.PausedAt)
	}
	if !x.LastActivityAt.IsZero() {
		b = appendTime(b, `,"last_activity_at":`, x.LastActivityAt)
	}
	if s := x.Size; s != nil {
		b = append(b, `,"size":{"bytes":`...)
		b = strconv.AppendInt(b, s.Bytes, 10)
		b = append(b, `,"source":`...)
		b = appendStr(b, s.Source)
		if !s.At.IsZero() {
			b = appendTime(b, `,"at":`, s.At)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendCaps(b []byte, c *Capabilities) []byte {
	flags := [...]struct {
		k string
		v bool
	}{
		{"list", c.List}, {"last_activity", c.LastActivity}, {"suspend", c.Suspend},
		{"suspend_keeps_files", c.SuspendKeepsFiles}, {"suspend_keeps_memory", c.SuspendKeepsMemory},
		{"resume_same_identity", c.ResumeSameIdentity}, {"delete", c.Delete},
		{"native_idle_pause", c.NativeIdlePause}, {"native_paused_ttl", c.NativePausedTTL},
	}
	b = append(b, '{')
	for i, f := range flags {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, f.k...)
		b = append(b, '"', ':')
		b = strconv.AppendBool(b, f.v)
	}
	return append(b, '}')
}

func (e *encoder) errorEnvelope(x *Error) {
	b := append(e.b, `{"error":{"kind":`...)
	b = appendStr(b, string(x.Kind))
	b = append(b, `,"message":`...)
	b = appendStr(b, x.Message)
	if x.RetryAfter > 0 {
		b = append(b, `,"retry_after":`...)
		b = strconv.AppendFloat(b, x.RetryAfter.Seconds(), 'f', -1, 64)
	}
	e.b = append(b, `}}`...)
}
