package main

import (
	"strings"
	"testing"
)

// The failures and positions below are those CPython's own json tests
// expect (3.13, with its trailing-comma messages).
func TestPyLoadsErrors(t *testing.T) {
	for _, tc := range []struct {
		doc, msg string
		pos      int
	}{
		{"", "Expecting value", 0},
		{"[", "Expecting value", 1},
		{"[42", "Expecting ',' delimiter", 3},
		{"[42,", "Expecting value", 4},
		{`["`, "Unterminated string starting at", 1},
		{`["spam`, "Unterminated string starting at", 1},
		{`["spam"`, "Expecting ',' delimiter", 7},
		{"{", "Expecting property name enclosed in double quotes", 1},
		{`{"spam"`, "Expecting ':' delimiter", 7},
		{`{"spam":`, "Expecting value", 8},
		{`{"spam":42`, "Expecting ',' delimiter", 10},
		{`{"spam":42,`, "Expecting property name enclosed in double quotes", 11},
		{`"spam`, "Unterminated string starting at", 0},
		{"[,", "Expecting value", 1},
		{`{"spam":[}`, "Expecting value", 9},
		{`[42 "spam"`, "Expecting ',' delimiter", 4},
		{"[42,]", "Illegal trailing comma before end of array", 3},
		{`{"spam":[42}`, "Expecting ',' delimiter", 11},
		{`["]`, "Unterminated string starting at", 1},
		{"{42", "Expecting property name enclosed in double quotes", 1},
		{"[{]", "Expecting property name enclosed in double quotes", 2},
		{`{"spam"}`, "Expecting ':' delimiter", 7},
		{`{"spam":42 "ham"`, "Expecting ',' delimiter", 11},
		{`{"spam":42,}`, "Illegal trailing comma before end of object", 10},
		{`{"spam":42 , }`, "Illegal trailing comma before end of object", 11},
		{"[123  , ]", "Illegal trailing comma before end of array", 6},
		{"[]]", "Extra data", 2},
		{`42,"spam"`, "Extra data", 2},
		{`"spam",42`, "Extra data", 6},
		{"[0e]", "Expecting ',' delimiter", 2},
		{`["a\qb"]`, "Invalid \\escape", 3},
		{`["\uZZZZ"]`, "Invalid \\uXXXX escape", 3},
		{"[\"a\tb\"]", "Invalid control character at", 3},
		{"\ufeff[]", "Unexpected UTF-8 BOM (decode using utf-8-sig)", 0},
		{"[\"é\", x]", "Expecting value", 6}, // positions count characters
	} {
		_, err := pyLoads(tc.doc)
		je, ok := err.(*pyJSONError)
		if !ok || je.msg != tc.msg || je.pos != tc.pos {
			t.Errorf("%q: %v, want %s at %d", tc.doc, err, tc.msg, tc.pos)
		}
	}
	_, err := pyLoads("\n  \n\n     !")
	if got, want := err.Error(), "Expecting value: line 4 column 6 (char 10)"; got != want {
		t.Errorf("line and column: %q, want %q", got, want)
	}
}

func TestPyLoadsValues(t *testing.T) {
	for doc, want := range map[string]string{
		`{"b": 1, "a": [true, null, 1.0, 1e16, -0, 2.5e-5], "b": "x'y"}`: `{'b': "x'y", 'a': [True, None, 1.0, 1e+16, 0, 2.5e-05]}`,
		`[NaN, Infinity, -Infinity, 12345678901234567890]`:               `[nan, inf, -inf, 12345678901234567890]`,
		`"\ud83d\ude00 \u00e9\n"`:                                        `'😀 é\n'`,
		` {} `:                                                           `{}`,
	} {
		v, err := pyLoads(doc)
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		if got := pyValueRepr(v); got != want {
			t.Errorf("%s: repr %s, want %s", doc, got, want)
		}
	}
	deep := ""
	for range pyMaxDepth + 1 {
		deep += "["
	}
	if _, err := pyLoads(deep); err == nil {
		t.Error("no error past the nesting limit")
	} else if _, ok := err.(*pyRecursionError); !ok {
		t.Errorf("nesting: %v", err)
	}
}

func TestPyLoadsShapes(t *testing.T) {
	v, err := pyLoads(`{"a": 1, "b": [2.5, "x", null, false], "a": 3}`)
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*pyDict)
	if a, ok := d.get("a"); !ok || a != pyIntLit("3") || pyTypeName(a) != "int" {
		t.Errorf("a = %#v", a)
	}
	names := []string{}
	for _, x := range append([]any{d}, d.vals["b"].([]any)...) {
		names = append(names, pyTypeName(x))
	}
	if got := strings.Join(names, " "); got != "dict float str NoneType bool" {
		t.Errorf("type names %s", got)
	}
	p := plain(d).(map[string]any)
	if p["a"] != 3.0 || p["b"].([]any)[0] != 2.5 {
		t.Errorf("plain = %#v", p)
	}
}
