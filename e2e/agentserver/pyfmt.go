package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// Texts the real server builds with Python's own formatting: error
// details quote paths with repr(), headers with urllib's quote(), the
// archive manifest with json.dumps. The emulator writes them the same way
// so a client sees the same bytes.

// pyQuote is urllib.parse.quote(v, safe=safe): every byte of v's UTF-8
// but letters, digits, "_.-~" and the bytes in safe becomes %XX.
func pyQuote(v, safe string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("_.-~", c) >= 0 || strings.IndexByte(safe, c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// pyRepr is repr() of a str. Bytes that are not UTF-8 come out as the
// surrogate escapes Python decodes file names into ('\udcff').
func pyRepr(s string) string {
	quote := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, `\udc%02x`, s[i])
			i++
			continue
		}
		i += size
		switch {
		case r == '\\' || r == rune(quote):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x80 || pyPrintable(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// pyPrintable approximates str.isprintable() for one character: letters,
// marks, numbers, punctuation, symbols and the ASCII space.
func pyPrintable(r rune) bool {
	return r == ' ' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S)
}

// pyOSError is str() of the OSError Python raises for err on path:
// "[Errno 2] No such file or directory: '/x'". path is the path as the
// request named it (a box path), never the host path under a root.
func pyOSError(err error, path string) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err.Error()
	}
	msg := errno.Error()
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	return fmt.Sprintf("[Errno %d] %s: %s", int(errno), msg, pyRepr(path))
}

// pyPathStr is str(PurePosixPath(p)): repeated slashes and "." parts go,
// ".." stays, and so do exactly two leading slashes (POSIX lets them mean
// something else).
func pyPathStr(p string) string {
	if p == "" {
		return "."
	}
	root := ""
	switch {
	case strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "///"):
		root = "//"
	case strings.HasPrefix(p, "/"):
		root = "/"
	}
	var parts []string
	for part := range strings.SplitSeq(p, "/") {
		if part != "" && part != "." {
			parts = append(parts, part)
		}
	}
	s := root + strings.Join(parts, "/")
	if s == "" {
		return "."
	}
	return s
}

// pyJoin is str(PurePosixPath(dir) / name) for a plain name.
func pyJoin(dir, name string) string {
	d := pyPathStr(dir)
	switch {
	case d == ".":
		return name
	case strings.HasSuffix(d, "/"):
		return d + name
	}
	return d + "/" + name
}

// pyName is Path(p).name.
func pyName(p string) string {
	s := pyPathStr(p)
	if s == "/" || s == "//" || s == "." {
		return ""
	}
	return s[strings.LastIndex(s, "/")+1:]
}

// pyParent is str(PurePosixPath(p).parent).
func pyParent(p string) string {
	s := pyPathStr(p)
	i := strings.LastIndex(s, "/")
	switch {
	case s == "/" || s == "//" || s == ".":
		return s
	case i < 0:
		return "."
	case i == 0:
		return "/"
	case i == 1 && strings.HasPrefix(s, "//"):
		return "//"
	}
	return s[:i]
}

// pyLower is str.lower(): Go's per-character lower case plus the two
// context rules Python applies (dotted capital I, and a final sigma).
func pyLower(s string) string {
	if !strings.ContainsAny(s, "\u0130\u03a3") {
		return strings.ToLower(s)
	}
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		switch r {
		case '\u0130':
			b.WriteString("i\u0307")
		case '\u03a3':
			// Final when a cased letter precedes it and none follows
			// (case-ignorable characters in between are skipped).
			before, after := false, false
			for j := i - 1; j >= 0; j-- {
				if unicode.In(rs[j], unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk) || rs[j] == '\'' || rs[j] == '.' || rs[j] == ':' {
					continue
				}
				before = unicode.IsUpper(rs[j]) || unicode.IsLower(rs[j]) || unicode.IsTitle(rs[j])
				break
			}
			for j := i + 1; j < len(rs); j++ {
				if unicode.In(rs[j], unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk) || rs[j] == '\'' || rs[j] == '.' || rs[j] == ':' {
					continue
				}
				after = unicode.IsUpper(rs[j]) || unicode.IsLower(rs[j]) || unicode.IsTitle(rs[j])
				break
			}
			if before && !after {
				b.WriteRune('ς')
			} else {
				b.WriteRune('σ')
			}
		default:
			b.WriteString(strings.ToLower(string(r)))
		}
	}
	return b.String()
}

// pyFloatRepr is repr() of a float: the shortest digits that read back
// the same, always with a fraction or an exponent.
func pyFloatRepr(f float64) string {
	a := math.Abs(f)
	if a != 0 && (a >= 1e16 || a < 1e-4) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Python writes at least two exponent digits, as Go does.
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

// pyJSONString is a JSON string as json.dumps writes it with its default
// ensure_ascii=True: every non-ASCII character as \uXXXX (a surrogate pair
// above U+FFFF), and bytes that are not UTF-8 as the surrogate escapes
// Python decodes file names into.
func pyJSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, `\udc%02x`, s[i])
			i++
			continue
		}
		i += size
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || r > 0x7e && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// decodeReplace is bytes.decode("utf-8", errors="replace"): each maximal
// ill-formed subsequence becomes one U+FFFD (Go's own decoding would give
// one per byte).
func decodeReplace(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	return string(appendDecoded(nil, p))
}

// appendDecoded appends the characters decodeReplace would give.
func appendDecoded(dst []rune, p []byte) []rune {
	for i := 0; i < len(p); {
		if c := p[i]; c < utf8.RuneSelf {
			dst = append(dst, rune(c))
			i++
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if r != utf8.RuneError || size > 1 {
			dst = append(dst, r)
			i += size
			continue
		}
		dst = append(dst, utf8.RuneError)
		i += invalidRun(p[i:])
	}
	return dst
}

// invalidRun is the length of the maximal subpart of an ill-formed
// sequence starting at p[0]: a lead byte followed by the continuation
// bytes that were still valid for it (Unicode's table 3-7).
func invalidRun(p []byte) int {
	need, lo, hi := 0, byte(0x80), byte(0xbf)
	switch c := p[0]; {
	case 0xc2 <= c && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case 0xe1 <= c && c <= 0xec, c == 0xee, c == 0xef:
		need = 2
	case c == 0xed:
		need, hi = 2, 0x9f
	case c == 0xf0:
		need, lo = 3, 0x90
	case 0xf1 <= c && c <= 0xf3:
		need = 3
	case c == 0xf4:
		need, hi = 3, 0x8f
	default:
		return 1
	}
	n := 1
	if n < len(p) && lo <= p[n] && p[n] <= hi {
		n++
		for k := 1; k < need && n < len(p) && 0x80 <= p[n] && p[n] <= 0xbf; k++ {
			n++
		}
	}
	return n
}
