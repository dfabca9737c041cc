package main

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestSeedRepoIsRealGit checks the seeded repository with the real git and
// exports it both ways.
func TestSeedRepoIsRealGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipping: the git binary is needed to check the seeded repository")
	}
	dir := filepath.Join(t.TempDir(), "project")
	for _, pure := range []bool{true, false} {
		e := newEnv(t, Config{SeedRepo: dir, PureGit: pure})
		if out := gitT(t, dir, "fsck", "--strict"); strings.Contains(out, "error") {
			t.Fatalf("git fsck: %s", out)
		}
		if st := gitT(t, dir, "status", "--porcelain"); st != "M README.md\n?? notes.md" && st != "M README.md\n?? notes.md\n" {
			t.Errorf("status of the seeded repository: %q", st)
		}
		if got := gitT(t, dir, "rev-parse", "origin/main"); got != gitT(t, dir, "rev-parse", "HEAD") {
			t.Errorf("origin/main %s is not HEAD", got)
		}
		code, h, patch := e.archiveRaw(url.Values{"path": {dir}})
		if code != 200 || h.Get("X-Archive-Base-Commit") == "" || !strings.Contains(string(patch), "notes.md") ||
			!strings.Contains(string(patch), "README.md") || strings.Contains(string(patch), "main.go") {
			t.Errorf("pure=%v: git-delta of the seeded repo: %d %v\n%s", pure, code, h, patch)
		}
		// Applying the patch on a clean checkout of HEAD gives the work tree.
		out := t.TempDir()
		tarball := filepath.Join(t.TempDir(), "base.tar")
		gitT(t, dir, "archive", "-o", tarball, "HEAD")
		if b, err := exec.Command("tar", "-xf", tarball, "-C", out).CombinedOutput(); err != nil {
			t.Fatalf("untar: %v %s", err, b)
		}
		pf := filepath.Join(t.TempDir(), "p.patch")
		os.WriteFile(pf, patch, 0o644)
		gitT(t, out, "init", "-q")
		gitT(t, out, "apply", "--binary", pf)
		for _, f := range []string{"README.md", "notes.md"} {
			want, _ := os.ReadFile(filepath.Join(dir, f))
			got, _ := os.ReadFile(filepath.Join(out, f))
			if string(got) != string(want) {
				t.Errorf("pure=%v: %s after apply = %q, want %q", pure, f, got, want)
			}
		}
	}
}
