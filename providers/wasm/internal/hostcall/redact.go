package hostcall

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// Redaction works on what text means, not on its bytes. A secret is found
// when it appears raw, as hex (any case), or inside a base64 (standard or
// URL alphabet) or base32 (any case) text at any alignment; and in each of those forms every
// character may also be written as an escape: JSON/JS (\u0074, \x74, \/),
// URL percent-encoding (%74, + for a space) or an HTML character reference
// (&#116;, &#x74;, &amp;). Hex digits of escapes match in any case.

// needle is one encoded form of a secret; fold makes letters match in any
// case (for hex, whose letters carry no case).
type needle struct {
	b    []byte
	fold bool
}

// scrubber finds any of a set of secrets in any supported encoding.
type scrubber struct {
	needles []needle
	// byFirst lists, for each byte, the needles that may start with it
	// unescaped (both cases when folded); a byte that starts an escape
	// may begin any needle.
	byFirst [256][]int
	escape  [256]bool
}

// newScrubber derives the encoded forms of the secrets; secrets shorter
// than minRedact are ignored.
func newScrubber(secrets []string) *scrubber {
	s := &scrubber{}
	seen := map[string]bool{}
	add := func(b string, fold bool) {
		if len(b) < minRedact || seen[b] {
			return
		}
		seen[b] = true
		i := len(s.needles)
		s.needles = append(s.needles, needle{b: []byte(b), fold: fold})
		firsts := []byte{b[0]}
		if fold && lower(b[0]) != upper(b[0]) {
			firsts = []byte{lower(b[0]), upper(b[0])}
		}
		for _, c := range firsts {
			s.byFirst[c] = append(s.byFirst[c], i)
		}
	}
	for _, c := range []byte{'\\', '%', '&', '+'} {
		s.escape[c] = true
	}
	for _, v := range secrets {
		if len(v) < minRedact {
			continue
		}
		add(v, false)
		add(hex.EncodeToString([]byte(v)), true)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			for k := 0; k < 3; k++ {
				add(base64Core(enc, v, k), false)
			}
		}
		for k := 0; k < 5; k++ {
			add(base32Core(v, k), true)
		}
	}
	return s
}

// base64Core returns the base64 characters that depend only on v when v
// follows k other bytes: the same characters appear wherever v sits at
// that alignment inside a larger encoded text.
func base64Core(enc *base64.Encoding, v string, k int) string {
	full := enc.EncodeToString(append(make([]byte, k), v...))
	start := (8*k + 5) / 6
	end := 8 * (k + len(v)) / 6 // exclusive: chars wholly inside v
	if end > len(full) {
		end = len(full)
	}
	if start >= end {
		return ""
	}
	return strings.TrimRight(full[start:end], "=")
}

// base32Core is base64Core for base32 (5 bits a character).
func base32Core(v string, k int) string {
	full := base32.StdEncoding.EncodeToString(append(make([]byte, k), v...))
	start := (8*k + 4) / 5
	end := min(8*(k+len(v))/5, len(full))
	if start >= end {
		return ""
	}
	return strings.TrimRight(full[start:end], "=")
}

func (s *scrubber) empty() bool { return s == nil || len(s.needles) == 0 }

// next returns the first match at or after from, as [start, end).
func (s *scrubber) next(b []byte, from int) (int, int, bool) {
	if s.empty() {
		return 0, 0, false
	}
	for i := from; i < len(b); i++ {
		c := b[i]
		if s.escape[c] {
			for _, n := range s.needles {
				if end, ok := n.matchAt(b, i); ok {
					return i, end, true
				}
			}
			continue
		}
		for _, k := range s.byFirst[c] {
			if end, ok := s.needles[k].matchAt(b, i); ok {
				return i, end, true
			}
		}
	}
	return 0, 0, false
}

// matchAt reports whether the needle starts at b[i], and where it ends.
func (n needle) matchAt(b []byte, i int) (int, bool) {
	p := i
	for j := 0; j < len(n.b); j++ {
		if p >= len(b) {
			return 0, false
		}
		want := n.b[j]
		if got, w, ok := unescape(b, p); ok && eqByte(got, want, n.fold) {
			p += w
			continue
		}
		if eqByte(b[p], want, n.fold) {
			p++
			continue
		}
		return 0, false
	}
	return p, true
}

func eqByte(a, b byte, fold bool) bool {
	if a == b {
		return true
	}
	return fold && lower(a) == lower(b)
}

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// unescape decodes one escaped character at b[p]: the byte it stands for
// and how many bytes the escape takes. Only escapes of single bytes are
// decoded; secrets are header values, so ASCII.
func unescape(b []byte, p int) (byte, int, bool) {
	switch b[p] {
	case '\\':
		if p+1 >= len(b) {
			return 0, 0, false
		}
		switch c := b[p+1]; c {
		case 'u':
			if v, ok := hexVal(b, p+2, 4); ok && v < 0x100 {
				return byte(v), 6, true
			}
		case 'x':
			if v, ok := hexVal(b, p+2, 2); ok {
				return byte(v), 4, true
			}
		case '"', '\\', '/', '\'':
			return c, 2, true
		case 't':
			return '\t', 2, true
		}
	case '%':
		if v, ok := hexVal(b, p+1, 2); ok {
			return byte(v), 3, true
		}
	case '+':
		return ' ', 1, true
	case '&':
		return entity(b, p)
	}
	return 0, 0, false
}

var namedEntities = map[string]byte{"amp": '&', "lt": '<', "gt": '>', "quot": '"', "apos": '\'', "sol": '/', "plus": '+', "equals": '=', "percnt": '%'}

// entity decodes an HTML character reference at b[p] ('&').
func entity(b []byte, p int) (byte, int, bool) {
	semi := -1
	for q := p + 1; q < len(b) && q <= p+10; q++ {
		if b[q] == ';' {
			semi = q
			break
		}
	}
	if semi < 0 {
		return 0, 0, false
	}
	body := string(b[p+1 : semi])
	w := semi - p + 1
	if strings.HasPrefix(body, "#x") || strings.HasPrefix(body, "#X") {
		if v, ok := hexVal([]byte(body), 2, len(body)-2); ok && len(body) > 2 && v < 0x100 {
			return byte(v), w, true
		}
		return 0, 0, false
	}
	if strings.HasPrefix(body, "#") {
		v := 0
		for _, c := range body[1:] {
			if c < '0' || c > '9' {
				return 0, 0, false
			}
			v = v*10 + int(c-'0')
		}
		if len(body) > 1 && v < 0x100 {
			return byte(v), w, true
		}
		return 0, 0, false
	}
	if c, ok := namedEntities[strings.ToLower(body)]; ok {
		return c, w, true
	}
	return 0, 0, false
}

func hexVal(b []byte, p, n int) (int, bool) {
	if n <= 0 || n > 6 || p+n > len(b) {
		return 0, false
	}
	v := 0
	for _, c := range b[p : p+n] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// redact replaces every match by Redacted; it returns b itself when
// nothing matched.
func (s *scrubber) redact(b []byte) []byte {
	start, end, ok := s.next(b, 0)
	if !ok {
		return b
	}
	out := make([]byte, 0, len(b))
	prev := 0
	for ok {
		out = append(out, b[prev:start]...)
		out = append(out, Redacted...)
		prev = end
		start, end, ok = s.next(b, end)
	}
	return append(out, b[prev:]...)
}

func (s *scrubber) redactString(v string) string {
	if s.empty() {
		return v
	}
	b := []byte(v)
	if r := s.redact(b); len(b) == 0 || len(r) != len(b) || &r[0] != &b[0] {
		return string(r)
	}
	return v
}

func (s *scrubber) contains(v string) bool {
	_, _, ok := s.next([]byte(v), 0)
	return ok
}
