package wire

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/canvasapp/companion/core"
)

// Results are decoded by hand rather than with encoding/json: reflection
// was most of the host's cost of a call. The reader is strict RFC 8259
// (no trailing commas, no leading zeros, no control characters in
// strings, nothing after the value), matches member names exactly,
// ignores members it does not know at any depth, lets the last of
// duplicate members win, treats null as absent, and replaces invalid
// UTF-8 and lone surrogates with U+FFFD, as encoding/json does.
// decode_test.go checks it against encoding/json.

// ErrSyntax marks a result that is not JSON, or not an object with "ok"
// or "error". Other decoding errors name the member whose value has the
// wrong type.
var ErrSyntax = errors.New("malformed JSON")

// maxDepth bounds nesting, so a hostile result cannot exhaust the stack.
const maxDepth = 1000

// reader parses one JSON document. A syntax error stops it; a value of the
// wrong type is skipped and the first such error kept, so that, as with
// encoding/json, a syntax error anywhere wins over a type error.
type reader struct {
	b       []byte
	i       int
	bad     bool  // syntax error
	typeErr error // first value of the wrong type
	path    []seg // where the reader is, for type errors
	segs    [16]seg
}

// seg is one step of a path: a member name, or an array index when name
// is empty.
type seg struct {
	name string
	idx  int
}

func (r *reader) syntax() {
	r.bad = true
	r.i = len(r.b)
}

// wrongType records that the next value is not what was wanted, and skips
// it.
func (r *reader) wrongType(want string) {
	got := r.kind()
	r.skip()
	if r.typeErr == nil {
		r.typeErr = fmt.Errorf("%s: want %s, got %s", r.where(), want, got)
	}
}

func (r *reader) where() string {
	var b []byte
	for _, s := range r.path {
		switch {
		case s.name == "" && s.idx >= 0:
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(s.idx), 10)
			b = append(b, ']')
		default:
			if len(b) > 0 {
				b = append(b, '.')
			}
			b = append(b, CleanMessage(s.name)...)
		}
	}
	return string(b)
}

func (r *reader) kind() string {
	switch r.peek() {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func (r *reader) peek() byte {
	for r.i < len(r.b) {
		switch c := r.b[r.i]; c {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return c
		}
	}
	return 0
}

// literal consumes lit (true, false or null) if it is next.
func (r *reader) literal(lit string) bool {
	if r.peek() != lit[0] {
		return false
	}
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		r.syntax()
		return false
	}
	r.i += len(lit)
	return true
}

// null consumes a null if it is next.
func (r *reader) null() bool { return r.peek() == 'n' && r.literal("null") }

// object reads an object, calling member for each member with the reader
// positioned at its value; member must consume the value. It reports false
// (and reads nothing) when the next value is not an object.
func (r *reader) object(member func(name string)) bool {
	if r.peek() != '{' {
		return false
	}
	r.i++
	if len(r.path) >= maxDepth {
		r.syntax()
		return true
	}
	if r.peek() == '}' {
		r.i++
		return true
	}
	for !r.bad {
		if r.peek() != '"' {
			r.syntax()
			break
		}
		name := r.str()
		if r.peek() != ':' {
			r.syntax()
			break
		}
		r.i++
		r.path = append(r.path, seg{name: name})
		member(name)
		r.path = r.path[:len(r.path)-1]
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			return true
		default:
			r.syntax()
		}
	}
	return true
}

// array reads an array like object does.
func (r *reader) array(elem func(i int)) bool {
	if r.peek() != '[' {
		return false
	}
	r.i++
	if len(r.path) >= maxDepth {
		r.syntax()
		return true
	}
	if r.peek() == ']' {
		r.i++
		return true
	}
	for n := 0; !r.bad; n++ {
		r.path = append(r.path, seg{idx: n})
		elem(n)
		r.path = r.path[:len(r.path)-1]
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			return true
		default:
			r.syntax()
		}
	}
	return true
}

// str reads a string; the caller has seen the opening quote.
func (r *reader) str() string {
	r.i++ // opening quote
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			s := string(r.b[start:r.i])
			r.i++
			return s
		case c == '\\' || c >= utf8.RuneSelf:
			return r.slowStr(start)
		case c < 0x20:
			r.syntax()
			return ""
		}
		r.i++
	}
	r.syntax()
	return ""
}

// slowStr finishes a string with escapes or non-ASCII bytes.
func (r *reader) slowStr(start int) string {
	out := append([]byte(nil), r.b[start:r.i]...)
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return string(out)
		case c < 0x20:
			r.syntax()
			return ""
		case c >= utf8.RuneSelf:
			ch, size := utf8.DecodeRune(r.b[r.i:])
			out = utf8.AppendRune(out, ch) // RuneError for each invalid byte
			r.i += size
			continue
		case c != '\\':
			out = append(out, c)
			r.i++
			continue
		}
		if r.i+1 >= len(r.b) {
			break
		}
		esc := r.b[r.i+1]
		r.i += 2
		switch esc {
		case '"', '\\', '/':
			out = append(out, esc)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			ch, ok := r.hex4()
			if !ok {
				r.syntax()
				return ""
			}
			if utf16.IsSurrogate(ch) {
				ch2 := utf8.RuneError
				if r.i+1 < len(r.b) && r.b[r.i] == '\\' && r.b[r.i+1] == 'u' {
					save := r.i
					r.i += 2
					lo, ok := r.hex4()
					if !ok {
						r.syntax()
						return ""
					}
					if dec := utf16.DecodeRune(ch, lo); dec != utf8.RuneError {
						ch2 = dec
					} else {
						r.i = save // not a pair: the second escape stands alone
					}
				}
				ch = ch2
			}
			out = utf8.AppendRune(out, ch)
		default:
			r.syntax()
			return ""
		}
	}
	r.syntax()
	return ""
}

func (r *reader) hex4() (rune, bool) {
	if len(r.b)-r.i < 4 {
		return 0, false
	}
	var v rune
	for _, c := range r.b[r.i : r.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | rune(c)
	}
	r.i += 4
	return v, true
}

// number reads a number's text, checking the JSON grammar.
func (r *reader) number() string {
	start := r.i
	digits := func() int {
		n := 0
		for r.i < len(r.b) && '0' <= r.b[r.i] && r.b[r.i] <= '9' {
			r.i++
			n++
		}
		return n
	}
	if r.i < len(r.b) && r.b[r.i] == '-' {
		r.i++
	}
	switch {
	case r.i < len(r.b) && r.b[r.i] == '0':
		r.i++
	case digits() == 0:
		r.syntax()
		return ""
	}
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		if digits() == 0 {
			r.syntax()
			return ""
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if digits() == 0 {
			r.syntax()
			return ""
		}
	}
	return string(r.b[start:r.i])
}

// skip consumes any value.
func (r *reader) skip() {
	switch c := r.peek(); {
	case c == '{':
		r.object(func(string) { r.skip() })
	case c == '[':
		r.array(func(int) { r.skip() })
	case c == '"':
		r.str()
	case c == 't':
		r.literal("true")
	case c == 'f':
		r.literal("false")
	case c == 'n':
		r.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		r.number()
	default:
		r.syntax()
	}
}

// string reads a string (null leaves *dst alone).
func (r *reader) string(dst *string) {
	switch r.peek() {
	case '"':
		*dst = r.str()
	case 'n':
		r.null()
	default:
		r.wrongType("a string")
	}
}

func (r *reader) bool(dst *bool) {
	switch r.peek() {
	case 't':
		*dst = r.literal("true")
	case 'f':
		r.literal("false")
		*dst = false
	case 'n':
		r.null()
	default:
		r.wrongType("a boolean")
	}
}

func (r *reader) int64(dst *int64) {
	switch c := r.peek(); {
	case c == 'n':
		r.null()
	case c == '-' || '0' <= c && c <= '9':
		s := r.number()
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil && r.typeErr == nil {
			r.typeErr = fmt.Errorf("%s: want an integer, got %.40s", r.where(), s)
		}
		*dst = v
	default:
		r.wrongType("a number")
	}
}

func (r *reader) float64(dst *float64) {
	switch c := r.peek(); {
	case c == 'n':
		r.null()
	case c == '-' || '0' <= c && c <= '9':
		s := r.number()
		v, err := strconv.ParseFloat(s, 64)
		if (err != nil || math.IsInf(v, 0)) && r.typeErr == nil {
			r.typeErr = fmt.Errorf("%s: %.40s is out of range", r.where(), s)
		}
		*dst = v
	default:
		r.wrongType("a number")
	}
}

func (r *reader) strMap(dst *map[string]string) {
	if r.null() {
		*dst = nil
		return
	}
	if *dst == nil && r.peek() == '{' {
		*dst = map[string]string{}
	}
	m := *dst
	if !r.object(func(name string) {
		var v string
		r.string(&v)
		m[name] = v
	}) {
		r.wrongType("an object")
	}
}

// box reads a Box (null leaves **dst nil).
func (r *reader) box(dst **Box) {
	if r.null() {
		*dst = nil
		return
	}
	if *dst == nil && r.peek() == '{' {
		*dst = &Box{}
	}
	if *dst == nil {
		r.wrongType("an object")
		return
	}
	r.boxInto(*dst)
}

// boxInto reads a Box into b (null leaves it alone).
func (r *reader) boxInto(b *Box) {
	if r.null() {
		return
	}
	if !r.object(func(name string) {
		switch name {
		case "id":
			r.string(&b.ID)
		case "name":
			r.string(&b.Name)
		case "url":
			r.string(&b.URL)
		case "key":
			r.string(&b.Key)
		case "state":
			r.string(&b.State)
		case "labels":
			r.strMap(&b.Labels)
		case "created_at":
			r.string(&b.CreatedAt)
		case "paused_at":
			r.string(&b.PausedAt)
		case "last_activity_at":
			r.string(&b.LastActivityAt)
		case "size":
			r.size(&b.Size)
		default:
			r.skip()
		}
	}) {
		r.wrongType("an object")
	}
}

func (r *reader) size(dst **Size) {
	if r.null() {
		*dst = nil
		return
	}
	if *dst == nil && r.peek() == '{' {
		*dst = &Size{}
	}
	s := *dst
	if !r.object(func(name string) {
		switch name {
		case "bytes":
			r.int64(&s.Bytes)
		case "source":
			r.string(&s.Source)
		case "at":
			r.string(&s.At)
		default:
			r.skip()
		}
	}) {
		r.wrongType("an object")
	}
}

func (r *reader) errorBody(dst **ErrorBody) {
	if r.null() {
		*dst = nil
		return
	}
	if *dst == nil && r.peek() == '{' {
		*dst = &ErrorBody{}
	}
	e := *dst
	if !r.object(func(name string) {
		switch name {
		case "kind":
			r.string(&e.Kind)
		case "message":
			r.string(&e.Message)
		case "retry_after":
			r.float64(&e.RetryAfterSeconds)
		default:
			r.skip()
		}
	}) {
		r.wrongType("an object")
	}
}

// okObject reads the ok payload, an object (or null, meaning empty).
func (r *reader) okObject(member func(name string)) {
	if r.null() {
		return
	}
	if !r.object(member) {
		r.wrongType("an object")
	}
}

// decodeResult reads an envelope. ok reads the ok member's value. It
// returns the error member, or nil when there was an ok member; a result
// with both or neither is ErrSyntax.
func decodeResult(b []byte, ok func(r *reader)) (*ErrorBody, error) {
	r := &reader{b: b}
	r.path = r.segs[:0]
	var eb *ErrorBody
	hasOK := false
	if !r.object(func(name string) {
		switch name {
		case "ok":
			hasOK = true
			ok(r)
		case "error":
			r.errorBody(&eb)
		default:
			r.skip()
		}
	}) {
		r.syntax()
	}
	if r.peek(); r.i < len(r.b) {
		r.syntax()
	}
	switch {
	case r.bad:
		return nil, ErrSyntax
	case r.typeErr != nil:
		return nil, r.typeErr
	case hasOK == (eb != nil):
		return nil, ErrSyntax
	}
	return eb, nil
}

// DecodeDescribe decodes the result of describe.
func DecodeDescribe(b []byte, out *DescribeOut) (*ErrorBody, error) {
	return decodeResult(b, func(r *reader) {
		r.okObject(func(name string) {
			switch name {
			case "name":
				r.string(&out.Name)
			case "version":
				r.string(&out.Version)
			case "capabilities":
				r.capabilities(&out.Capabilities)
			default:
				r.skip()
			}
		})
	})
}

func (r *reader) capabilities(dst **core.Capabilities) {
	if r.null() {
		*dst = nil
		return
	}
	if *dst == nil && r.peek() == '{' {
		*dst = &core.Capabilities{}
	}
	c := *dst
	if !r.object(func(name string) {
		var f *bool
		switch name {
		case "list":
			f = &c.List
		case "last_activity":
			f = &c.LastActivity
		case "suspend":
			f = &c.Suspend
		case "suspend_keeps_files":
			f = &c.SuspendKeepsFiles
		case "suspend_keeps_memory":
			f = &c.SuspendKeepsMemory
		case "resume_same_identity":
			f = &c.ResumeSameIdentity
		case "delete":
			f = &c.Delete
		case "native_idle_pause":
			f = &c.NativeIdlePause
		case "native_paused_ttl":
			f = &c.NativePausedTTL
		default:
			r.skip()
			return
		}
		r.bool(f)
	}) {
		r.wrongType("an object")
	}
}

// DecodeList decodes the result of list.
func DecodeList(b []byte, out *ListOut) (*ErrorBody, error) {
	return decodeResult(b, func(r *reader) {
		r.okObject(func(name string) {
			if name != "boxes" {
				r.skip()
				return
			}
			if r.null() {
				out.Boxes = nil
				return
			}
			out.Boxes = out.Boxes[:0]
			if !r.array(func(int) {
				out.Boxes = append(out.Boxes, Box{}) // null stays empty: ToCore reports its missing id
				r.boxInto(&out.Boxes[len(out.Boxes)-1])
			}) {
				r.wrongType("an array")
			}
		})
	})
}

// DecodeBox decodes the result of get, create, suspend and resume.
func DecodeBox(b []byte, out *BoxOut) (*ErrorBody, error) {
	return decodeResult(b, func(r *reader) {
		r.okObject(func(name string) {
			if name != "box" {
				r.skip()
				return
			}
			r.box(&out.Box)
		})
	})
}

// DecodeEmpty decodes the result of delete, whose ok payload is an object
// whose members are ignored.
func DecodeEmpty(b []byte) (*ErrorBody, error) {
	return decodeResult(b, func(r *reader) {
		r.okObject(func(string) { r.skip() })
	})
}

// EndpointOut is the ok payload of op endpoint.
type EndpointOut struct {
	URL     string
	Headers map[string]string
}

// DecodeEndpoint decodes the result of op endpoint:
// {"ok":{"endpoint":{"url":"…","headers":{…}}}}.
func DecodeEndpoint(b []byte, out *EndpointOut) (*ErrorBody, error) {
	return decodeResult(b, func(r *reader) {
		r.okObject(func(name string) {
			if name != "endpoint" {
				r.skip()
				return
			}
			if !r.object(func(m string) {
				switch m {
				case "url":
					r.string(&out.URL)
				case "headers":
					r.strMap(&out.Headers)
				default:
					r.skip()
				}
			}) {
				r.wrongType("an object")
			}
		})
	})
}
