package main

import (
	"syscall"
	"testing"
	"time"
)

// The expected values below are what CPython 3.12 prints for the same
// inputs.
func TestPythonFormatting(t *testing.T) {
	for in, want := range map[string]string{
		"/workspace/x":  `'/workspace/x'`,
		"it's":          `"it's"`,
		`both ' and "`:  `'both \' and "'`,
		"tab\tnl\n\x01": `'tab\tnl\n\x01'`,
		"café ☕":        `'café ☕'`,
		"\u00a0\u200b":  `'\xa0\u200b'`,
		"bad\xffbyte":   `'bad\udcffbyte'`,
		`back\slash`:    `'back\\slash'`,
	} {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%q) = %s, want %s", in, got, want)
		}
	}
	if got := pyOSError(syscall.EISDIR, "/w/d"); got != "[Errno 21] Is a directory: '/w/d'" {
		t.Errorf("pyOSError: %s", got)
	}
	for in, want := range map[string]string{
		"/workspace/p":          "%2Fworkspace%2Fp",
		"feature/naïve":         "feature%2Fna%C3%AFve",
		"git@h:o/my repo.git+x": "git%40h%3Ao%2Fmy%20repo.git%2Bx",
		"a-b_c.d~e":             "a-b_c.d~e",
	} {
		if got := pyQuote(in, ""); got != want {
			t.Errorf("quote(%q, safe='') = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"/a//b/./c/": "/a/b/c", "//x/y": "//x/y", "///x": "/x", "/a/../b": "/a/../b", "/": "/", "": ".", "a/b": "a/b",
	} {
		if got := pyPathStr(in); got != want {
			t.Errorf("str(PurePosixPath(%q)) = %q, want %q", in, got, want)
		}
	}
	if pyJoin("/w/", "x") != "/w/x" || pyJoin("/", "x") != "/x" || pyParent("/a/b") != "/a" || pyParent("/a") != "/" ||
		pyName("/a/b.txt/") != "b.txt" || pyName("/") != "" {
		t.Error("path helpers")
	}
	for in, want := range map[string]string{"ÉMILE": "émile", "İstanbul": "i̇stanbul", "ΟΔΟΣ": "οδος", "ΣΑ": "σα", "A Σ B": "a σ b"} {
		if got := pyLower(in); got != want {
			t.Errorf("%q.lower() = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"a\xffb":               "a\ufffdb",
		"\xe2\x82":             "\ufffd", // a truncated sequence is one
		"\xe2\x82\xe2\x82\xac": "\ufffd€",
		"\xed\xa0\x80":         "\ufffd\ufffd\ufffd", // a surrogate is three
		"\xf0\x9f\x98":         "\ufffd",
		"\xc0\xaf":             "\ufffd\ufffd", // an overlong lead byte is invalid alone
	} {
		if got := decodeReplace([]byte(in)); got != want {
			t.Errorf("%q.decode(errors=replace) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"plain": `"plain"`, "é": `"\u00e9"`, "😀": `"\ud83d\ude00"`, "<&>": `"<&>"`, "\x7f\b": `"\u007f\b"`, "q\"\\": `"q\"\\"`,
	} {
		if got := pyJSONString(in); got != want {
			t.Errorf("json.dumps(%q) = %s, want %s", in, got, want)
		}
	}
	for f, want := range map[float64]string{1787392800.5: "1787392800.5", 1787392800: "1787392800.0", 1787392800.123456789: "1787392800.1234567", 1e16: "1e+16"} {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("repr(%v) = %s, want %s", f, got, want)
		}
	}
}

func TestRedactRemote(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/o/r.git":                        "https://github.com/o/r.git",
		"https://x-access-token:ghs_abc@github.com/o/r.git": "https://****@github.com/o/r.git",
		"HTTP://tok@host/r":                                 "HTTP://****@host/r",
		"git@github.com:o/r.git":                            "git@github.com:o/r.git",
		"https://h/r.git?token=abc&ref=main":                "https://h/r.git?token=%3Credacted%3E&ref=main",
		"HTTPS://h/r?a=1&My_Session=x&a=2#frag":             "https://h/r?a=1&a=2&My_Session=%3Credacted%3E#frag",
		"https://h/r?q=a+b%20c":                             "https://h/r?q=a+b+c",
	} {
		if got := redactURLParams(redactURLCredentials(in)); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEventTimeIsNaiveLocalISO(t *testing.T) {
	at := time.Date(2026, 8, 22, 10, 0, 0, 123456789, time.UTC)
	local := at.Local()
	want := local.Format("2006-01-02T15:04:05") + ".123456"
	if got := eventTime(at); got != want {
		t.Errorf("eventTime = %q, want %q", got, want)
	}
	if got, want := eventTime(at.Truncate(time.Second)), local.Format("2006-01-02T15:04:05"); got != want {
		t.Errorf("eventTime (whole second) = %q, want %q", got, want)
	}
}
