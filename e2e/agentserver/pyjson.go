package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The sockets decode what a client sends with Python's json.loads
// (Starlette's receive_json), and a frame it refuses comes back to the
// client as an error event carrying the exception's text. pyLoads decodes
// as CPython 3.13's decoder does, with its messages and positions, and
// keeps what Python keeps: the order of an object's keys (a dict's repr
// shows it), ints apart from floats, and NaN and Infinity.

// pyDict is a decoded JSON object in its keys' first-seen order; a
// repeated key keeps its first place and takes the last value, as a dict.
type pyDict struct {
	keys []string
	vals map[string]any
}

func (d *pyDict) get(k string) (any, bool) {
	v, ok := d.vals[k]
	return v, ok
}

func (d *pyDict) set(k string, v any) {
	if _, ok := d.vals[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.vals[k] = v
}

// pyIntLit is a decoded JSON integer, kept as its digits (Python ints have no
// size limit).
type pyIntLit string

// pyJSONError is json.JSONDecodeError: a message and a position in
// characters (not bytes).
type pyJSONError struct {
	msg string
	pos int
	doc []rune
}

// Error renders it as str() does: "<msg>: line L column C (char P)".
func (e *pyJSONError) Error() string {
	line, col := 1, e.pos+1
	for i := 0; i < e.pos && i < len(e.doc); i++ {
		if e.doc[i] == '\n' {
			line++
			col = e.pos - i
		}
	}
	return fmt.Sprintf("%s: line %d column %d (char %d)", e.msg, line, col, e.pos)
}

// pyMaxDepth bounds nesting. CPython stops at its recursion limit with a
// RecursionError; where exactly depends on the build, so this number is
// the emulator's own.
const pyMaxDepth = 1000

type pyRecursionError struct{ what string }

func (e *pyRecursionError) Error() string {
	return "maximum recursion depth exceeded while decoding a JSON " + e.what + " from a unicode string"
}

// pyLoads is json.loads(s). The error is a *pyJSONError or a
// *pyRecursionError.
func pyLoads(s string) (any, error) {
	d := &pyDecoder{s: []rune(s)}
	if len(d.s) > 0 && d.s[0] == '\ufeff' {
		return nil, d.fail("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0)
	}
	v, end, err := d.value(d.ws(0), 0)
	if err != nil {
		return nil, err
	}
	if end = d.ws(end); end != len(d.s) {
		return nil, d.fail("Extra data", end)
	}
	return v, nil
}

type pyDecoder struct{ s []rune }

func (d *pyDecoder) fail(msg string, pos int) *pyJSONError {
	return &pyJSONError{msg: msg, pos: pos, doc: d.s}
}

func (d *pyDecoder) ws(i int) int {
	for i < len(d.s) && strings.ContainsRune(" \t\n\r", d.s[i]) {
		i++
	}
	return i
}

func (d *pyDecoder) at(i int) rune {
	if i < len(d.s) {
		return d.s[i]
	}
	return 0
}

func (d *pyDecoder) word(i int, w string) bool {
	return i+len(w) <= len(d.s) && string(d.s[i:i+len(w)]) == w
}

// value decodes the value starting at i and returns the index after it.
func (d *pyDecoder) value(i, depth int) (any, int, error) {
	switch c := d.at(i); {
	case i >= len(d.s):
	case c == '"':
		return d.str(i + 1)
	case c == '{':
		if depth >= pyMaxDepth {
			return nil, 0, &pyRecursionError{"object"}
		}
		return d.object(i+1, depth+1)
	case c == '[':
		if depth >= pyMaxDepth {
			return nil, 0, &pyRecursionError{"array"}
		}
		return d.array(i+1, depth+1)
	case d.word(i, "null"):
		return nil, i + 4, nil
	case d.word(i, "true"):
		return true, i + 4, nil
	case d.word(i, "false"):
		return false, i + 5, nil
	case d.word(i, "NaN"):
		return math.NaN(), i + 3, nil
	case d.word(i, "Infinity"):
		return math.Inf(1), i + 8, nil
	case d.word(i, "-Infinity"):
		return math.Inf(-1), i + 9, nil
	default:
		if v, end, ok := d.number(i); ok {
			return v, end, nil
		}
	}
	return nil, 0, d.fail("Expecting value", i)
}

// number matches -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? at i.
func (d *pyDecoder) number(i int) (any, int, bool) {
	digits := func(j int) int {
		for j < len(d.s) && d.s[j] >= '0' && d.s[j] <= '9' {
			j++
		}
		return j
	}
	j := i
	if d.at(j) == '-' {
		j++
	}
	switch c := d.at(j); {
	case c == '0':
		j++
	case c >= '1' && c <= '9':
		j = digits(j)
	default:
		return nil, 0, false
	}
	isFloat := false
	if d.at(j) == '.' && d.at(j+1) >= '0' && d.at(j+1) <= '9' {
		j, isFloat = digits(j+1), true
	}
	if c := d.at(j); c == 'e' || c == 'E' {
		k := j + 1
		if c := d.at(k); c == '+' || c == '-' {
			k++
		}
		if c := d.at(k); c >= '0' && c <= '9' {
			j, isFloat = digits(k), true
		}
	}
	text := string(d.s[i:j])
	if !isFloat {
		if text == "-0" {
			text = "0"
		}
		return pyIntLit(text), j, true
	}
	f, _ := strconv.ParseFloat(text, 64) // out of range is ±Inf, as float()
	return f, j, true
}

// str decodes a string whose opening quote is just before i.
func (d *pyDecoder) str(i int) (any, int, error) {
	begin := i - 1
	var b strings.Builder
	for {
		if i >= len(d.s) {
			return nil, 0, d.fail("Unterminated string starting at", begin)
		}
		c := d.s[i]
		switch {
		case c == '"':
			return b.String(), i + 1, nil
		case c < 0x20:
			return nil, 0, d.fail("Invalid control character at", i)
		case c != '\\':
			b.WriteRune(c)
			i++
			continue
		}
		if i+1 >= len(d.s) {
			return nil, 0, d.fail("Unterminated string starting at", begin)
		}
		esc := d.s[i+1]
		if esc != 'u' {
			r, ok := map[rune]rune{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[esc]
			if !ok {
				return nil, 0, d.fail("Invalid \\escape", i)
			}
			b.WriteRune(r)
			i += 2
			continue
		}
		r, ok := d.hex4(i + 2)
		if !ok {
			return nil, 0, d.fail("Invalid \\uXXXX escape", i+1)
		}
		i += 6
		if utf16.IsSurrogate(r) && r < 0xdc00 && d.at(i) == '\\' && d.at(i+1) == 'u' {
			if lo, ok := d.hex4(i + 2); ok && lo >= 0xdc00 && lo <= 0xdfff {
				r = utf16.DecodeRune(r, lo)
				i += 6
			}
		}
		if utf16.IsSurrogate(r) {
			r = utf8.RuneError // a lone surrogate has no UTF-8 form
		}
		b.WriteRune(r)
	}
}

// hex4 reads the four hex digits of a \u escape at i; CPython also wants
// one more character after them (the string cannot end there).
func (d *pyDecoder) hex4(i int) (rune, bool) {
	if i+4 >= len(d.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(d.s[i:i+4]), 16, 32)
	if err != nil || strings.ContainsAny(string(d.s[i:i+4]), "+-_") {
		return 0, false
	}
	return rune(n), true
}

func (d *pyDecoder) object(i, depth int) (any, int, error) {
	obj := &pyDict{vals: map[string]any{}}
	i = d.ws(i)
	if d.at(i) == '}' {
		return obj, i + 1, nil
	}
	if d.at(i) != '"' || i >= len(d.s) {
		return nil, 0, d.fail("Expecting property name enclosed in double quotes", i)
	}
	for {
		k, end, err := d.str(i + 1)
		if err != nil {
			return nil, 0, err
		}
		i = d.ws(end)
		if d.at(i) != ':' || i >= len(d.s) {
			return nil, 0, d.fail("Expecting ':' delimiter", i)
		}
		v, end, err := d.value(d.ws(i+1), depth)
		if err != nil {
			return nil, 0, err
		}
		obj.set(k.(string), v)
		i = d.ws(end)
		switch {
		case i < len(d.s) && d.s[i] == '}':
			return obj, i + 1, nil
		case i >= len(d.s) || d.s[i] != ',':
			return nil, 0, d.fail("Expecting ',' delimiter", i)
		}
		comma := i
		i = d.ws(i + 1)
		if i < len(d.s) && d.s[i] == '"' {
			continue
		}
		if i < len(d.s) && d.s[i] == '}' {
			return nil, 0, d.fail("Illegal trailing comma before end of object", comma)
		}
		return nil, 0, d.fail("Expecting property name enclosed in double quotes", i)
	}
}

func (d *pyDecoder) array(i, depth int) (any, int, error) {
	list := []any{}
	i = d.ws(i)
	if d.at(i) == ']' && i < len(d.s) {
		return list, i + 1, nil
	}
	for {
		v, end, err := d.value(i, depth)
		if err != nil {
			return nil, 0, err
		}
		list = append(list, v)
		i = d.ws(end)
		switch {
		case i < len(d.s) && d.s[i] == ']':
			return list, i + 1, nil
		case i >= len(d.s) || d.s[i] != ',':
			return nil, 0, d.fail("Expecting ',' delimiter", i)
		}
		comma := i
		i = d.ws(i + 1)
		if i < len(d.s) && d.s[i] == ']' {
			return nil, 0, d.fail("Illegal trailing comma before end of array", comma)
		}
	}
}

// pyValueRepr is repr() of a decoded value.
func pyValueRepr(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case pyIntLit:
		return string(v)
	case float64:
		switch {
		case math.IsNaN(v):
			return "nan"
		case math.IsInf(v, 1):
			return "inf"
		case math.IsInf(v, -1):
			return "-inf"
		}
		return pyFloatRepr(v)
	case string:
		return pyRepr(v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = pyValueRepr(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *pyDict:
		parts := make([]string, len(v.keys))
		for i, k := range v.keys {
			parts[i] = pyRepr(k) + ": " + pyValueRepr(v.vals[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// pyTypeName is type(v).__name__ of a decoded value.
func pyTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case pyIntLit:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case *pyDict:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}

// plain turns a decoded value into encoding/json's shapes (objects as
// maps, numbers as float64), for code shared with the HTTP routes.
func plain(v any) any {
	switch v := v.(type) {
	case pyIntLit:
		f, _ := strconv.ParseFloat(string(v), 64)
		return f
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = plain(x)
		}
		return out
	case *pyDict:
		out := make(map[string]any, len(v.keys))
		for _, k := range v.keys {
			out[k] = plain(v.vals[k])
		}
		return out
	}
	return v
}
