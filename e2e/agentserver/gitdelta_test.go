package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestIgnorer(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "root"), []byte("# comment\n*.log\n/only-top\nbuild/\ndocs/**/*.pdf\n!keep.log\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub"), []byte("*.tmp\n!a.tmp\n"), 0o644)
	ig := &ignorer{}
	ig.load(filepath.Join(dir, "root"), "")
	ig.load(filepath.Join(dir, "sub"), "pkg")
	cases := []struct {
		rel   string
		isDir bool
		want  bool
	}{
		{"x.log", false, true},
		{"deep/er/x.log", false, true},
		{"keep.log", false, false},
		{"only-top", false, true},
		{"a/only-top", false, false},
		{"build", true, true},
		{"build", false, false}, // "build/" matches directories only
		{"docs/a/b/c.pdf", false, true},
		{"docs/c.pdf", false, true},
		{"other/c.pdf", false, false},
		{"pkg/x.tmp", false, true},
		{"pkg/a.tmp", false, false},
		{"x.tmp", false, false}, // pkg's rules stay in pkg
	}
	for _, c := range cases {
		if got := ig.ignored(c.rel, c.isDir); got != c.want {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", c.rel, c.isDir, got, c.want)
		}
	}
}

func TestQuotePath(t *testing.T) {
	for in, want := range map[string]string{
		"a/b.txt":    "a/b.txt",
		"a/café.txt": `"a/caf\303\251.txt"`,
		`a/"q".txt`:  `"a/\"q\".txt"`,
		"a/tab\t":    `"a/tab\t"`,
	} {
		if got := quotePath(in); got != want {
			t.Errorf("quotePath(%q) = %s, want %s", in, got, want)
		}
	}
}
