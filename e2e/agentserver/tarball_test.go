package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// member is one tar member as a test reads it.
type member struct {
	hdr  *tar.Header
	body string
}

// untarAll reads every member in order, and the gzip header.
func untarAll(t *testing.T, body []byte) ([]member, gzip.Header, int64) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	var out []member
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out, gz.Header, int64(len(raw))
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out = append(out, member{hdr, string(b)})
	}
}

func names(ms []member) map[string]member {
	out := map[string]member{}
	for _, m := range ms {
		out[m.hdr.Name] = m
	}
	return out
}

// TestRepoRoot: the narrowing rule, case by case.
func TestRepoRoot(t *testing.T) {
	mk := func(t *testing.T, dirs ...string) string {
		root := t.TempDir()
		for _, d := range dirs {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	t.Run("the path itself", func(t *testing.T) {
		root := mk(t, ".git", "a/.git")
		if got := repoRoot(root); got != root {
			t.Errorf("got %s", got)
		}
	})
	for depth, rel := range []string{"a", "a/b", "a/b/c"} {
		t.Run("one repository at depth "+string(rune('1'+depth)), func(t *testing.T) {
			root := mk(t, rel+"/.git", "x/y")
			if got := repoRoot(root); got != filepath.Join(root, rel) {
				t.Errorf("got %s, want %s", got, filepath.Join(root, rel))
			}
		})
	}
	t.Run("depth 4 is not searched", func(t *testing.T) {
		root := mk(t, "a/b/c/d/.git")
		if got := repoRoot(root); got != root {
			t.Errorf("got %s", got)
		}
	})
	t.Run("two repositories: the path", func(t *testing.T) {
		root := mk(t, "a/.git", "b/c/.git")
		if got := repoRoot(root); got != root {
			t.Errorf("got %s", got)
		}
	})
	t.Run("a found repository is not entered", func(t *testing.T) {
		root := mk(t, "a/.git", "a/vendored/.git", "a/b/c/.git")
		if got := repoRoot(root); got != filepath.Join(root, "a") {
			t.Errorf("got %s", got)
		}
	})
	t.Run(".git as a file counts", func(t *testing.T) {
		root := mk(t, "wt")
		writeFile(t, filepath.Join(root, "wt", ".git"), "gitdir: /elsewhere/.git/worktrees/wt\n")
		if got := repoRoot(root); got != filepath.Join(root, "wt") {
			t.Errorf("got %s", got)
		}
	})
	t.Run("skipped directories", func(t *testing.T) {
		root := mk(t, "proj/.git", ".hidden/r/.git", "node_modules/r/.git", "venv/r/.git",
			"lib/site-packages/r/.git", "vendor/r/.git", "x/.cache/r/.git")
		// A symlinked directory with a repository is not entered either.
		other := mk(t, "r/.git")
		if err := os.Symlink(other, filepath.Join(root, "linked")); err != nil {
			t.Fatal(err)
		}
		if got := repoRoot(root); got != filepath.Join(root, "proj") {
			t.Errorf("got %s, want proj", got)
		}
	})
	t.Run("a symlink to a repository is not one", func(t *testing.T) {
		root := mk(t)
		other := mk(t, ".git")
		os.Symlink(other, filepath.Join(root, "link"))
		if got := repoRoot(root); got != root {
			t.Errorf("got %s", got)
		}
	})
}

func TestPathExcluded(t *testing.T) {
	cases := []struct {
		path     string
		isDir    bool
		patterns []string
		want     bool
	}{
		{"build", true, []string{"build/"}, true},
		{"build", false, []string{"build/"}, false}, // a file named like a dir-only pattern stays
		{"src/build/x.o", false, []string{"build/"}, true},
		{"src/build", false, []string{"build/"}, false},
		{"a/x.pyc", false, []string{"*.pyc"}, true},
		{"x.pyc", true, []string{"*.pyc"}, true},
		{"secrets/prod", false, []string{"secrets/prod"}, true},
		{"secrets/prod/key", false, []string{"secrets/prod"}, true},
		{"a/secrets/prod", false, []string{"secrets/prod"}, false}, // anchored at the root
		{"a/test", false, []string{"*/test"}, true},
		{"a/b/test", false, []string{"*/test"}, false}, // "*" does not cross "/"
		{"a/x/c", false, []string{"a/*/c"}, true},
		{"d/e", false, []string{"d/e/"}, false},
		{"d/e", true, []string{"d/e/"}, true},
		{"d/e/f", false, []string{"d/e/"}, true},
		{"node_modules/p/i.js", false, defaultExcludes, true},
		{".git/HEAD", false, defaultExcludes, true},
		{".gitignore", false, defaultExcludes, false},
		{"target", false, defaultExcludes, false},
		{"file1", false, []string{"file[0-9]"}, true},
		{"filea", false, []string{"file[!0-9]"}, true},
		{"file1", false, []string{"file[!0-9]"}, false},
		{"a]b", false, []string{"a[]]b"}, true},
		{"a[b", false, []string{"a[b"}, true},    // an unclosed "[" is literal
		{"fz", false, []string{"f[z-a]"}, false}, // a reversed range matches nothing
		{`a\b`, false, []string{`a\b`}, true},    // no escapes in fnmatch
		{"a.b", false, []string{"a?b"}, true},    // "?" is one character
		{"ünï", false, []string{"?n?"}, true},    // characters, not bytes
		{"x", false, []string{"/", "", "/x"}, false},
	}
	for _, c := range cases {
		if got := pathExcluded(strings.Split(c.path, "/"), c.patterns, c.isDir); got != c.want {
			t.Errorf("pathExcluded(%q, dir=%v, %q) = %v, want %v", c.path, c.isDir, c.patterns, got, c.want)
		}
	}
}

func TestSensitiveGit(t *testing.T) {
	for path, want := range map[string]bool{
		".git/config":                        true,
		".git/config.worktree":               true,
		".git/credentials":                   true,
		".git/.git-credentials":              true,
		".git/FETCH_HEAD":                    true,
		".git/logs":                          true,
		".git/logs/HEAD":                     true,
		".git/logs/refs/heads/main":          true,
		".git/modules/x/config":              true,
		".git/modules/x/logs/HEAD":           true,
		".git/modules/x/FETCH_HEAD":          true,
		".git/refs/heads/config":             true, // a branch named config: matched by its name, as upstream
		"sub/.git/config":                    true,
		".git":                               false,
		".git/HEAD":                          false,
		".git/objects/ab/cdef":               false,
		".git/modules/x/HEAD":                false,
		"config":                             false,
		"logs/x":                             false,
		"src/.gitconfig":                     false,
		"vendor/lib/.git/modules/y/packed":   false,
		"vendor/lib/.git/modules/y/logs/ref": true,
	} {
		if got := sensitiveGit(strings.Split(path, "/")); got != want {
			t.Errorf("sensitiveGit(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestTarGzMembers builds a workspace with every kind of entry and checks
// the archive member by member.
func TestTarGzMembers(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "my proj")
	writeFile(t, filepath.Join(root, "a.txt"), "alpha\n")
	writeFile(t, filepath.Join(root, "naïve dir", "été.txt"), "summer\n")
	writeFile(t, filepath.Join(root, "with space.txt"), "s\n")
	writeFile(t, filepath.Join(root, "build"), "a file named build\n")
	writeFile(t, filepath.Join(root, "dist", "out.js"), "built\n")
	writeFile(t, filepath.Join(root, "x.pyc"), "bytecode")
	writeFile(t, filepath.Join(root, "secrets", "prod", "key"), "k")
	writeFile(t, filepath.Join(root, "secrets", "dev"), "d")
	for _, d := range []string{"empty", "deep/er/est", ".git/objects/ab", ".git/modules/sub/objects", ".git/modules/sub/logs/refs"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	writeFile(t, filepath.Join(root, ".git", "HEAD"), "ref: refs/heads/main\n")
	writeFile(t, filepath.Join(root, ".git", "config"), "[remote \"origin\"]\n\turl = https://x:tok@example.invalid/r\n")
	writeFile(t, filepath.Join(root, ".git", "FETCH_HEAD"), "tok")
	writeFile(t, filepath.Join(root, ".git", "logs", "HEAD"), "log")
	writeFile(t, filepath.Join(root, ".git", "modules", "sub", "HEAD"), "ref: refs/heads/main\n")
	writeFile(t, filepath.Join(root, ".git", "modules", "sub", "config"), "secret")
	writeFile(t, filepath.Join(root, ".git", "modules", "sub", "credentials"), "secret")
	writeFile(t, filepath.Join(root, ".git", "modules", "sub", "logs", "HEAD"), "secret")
	writeFile(t, filepath.Join(root, "vendor", "lib", ".git", "config"), "secret")
	writeFile(t, filepath.Join(root, "vendor", "lib", ".git", "HEAD"), "ref: refs/heads/main\n")
	outside := filepath.Join(parent, "outside")
	writeFile(t, filepath.Join(outside, "secret.txt"), "outside")
	os.Symlink("a.txt", filepath.Join(root, "link.txt"))
	os.Symlink(outside, filepath.Join(root, "linkdir"))
	os.Symlink("nowhere", filepath.Join(root, "dangling"))
	if err := mkfifo(filepath.Join(root, "fifo")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "a.txt"), filepath.Join(root, "z-hardlink.txt")); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2026, 8, 1, 12, 0, 0, 250_000_000, time.UTC)
	os.Chtimes(filepath.Join(root, "a.txt"), mtime, mtime)
	os.Chmod(filepath.Join(root, "with space.txt"), 0o600)

	e := newEnv(t, Config{})
	code, h, body := e.archiveRaw(url.Values{"path": {root}, "format": {"tar.gz"}, "use_default_excludes": {"false"},
		"exclude": {"secrets/prod", "*.pyc", "dist/", "build/"}})
	if code != 200 {
		t.Fatalf("archive: %d %s", code, body)
	}
	if got := h.Get("Content-Disposition"); got != "attachment; filename*=utf-8''my%20proj.tar.gz" {
		t.Errorf("Content-Disposition %q", got)
	}
	ms, gzh, rawLen := untarAll(t, body)
	if rawLen%10240 != 0 {
		t.Errorf("the tar is %d bytes, not whole 10240-byte records as tarfile writes", rawLen)
	}
	if !strings.HasPrefix(gzh.Name, "tmp") || !strings.HasSuffix(gzh.Name, ".tar") {
		t.Errorf("gzip header name %q, want the temporary file's name without .gz", gzh.Name)
	}
	got := names(ms)
	want := []string{"my proj/", "my proj/a.txt", "my proj/naïve dir/", "my proj/naïve dir/été.txt", "my proj/with space.txt",
		"my proj/build", "my proj/secrets/", "my proj/secrets/dev", "my proj/empty/", "my proj/deep/", "my proj/deep/er/",
		"my proj/deep/er/est/", "my proj/.git/", "my proj/.git/HEAD", "my proj/.git/objects/", "my proj/.git/objects/ab/",
		"my proj/.git/modules/", "my proj/.git/modules/sub/", "my proj/.git/modules/sub/HEAD", "my proj/.git/modules/sub/objects/",
		"my proj/vendor/", "my proj/vendor/lib/", "my proj/vendor/lib/.git/", "my proj/vendor/lib/.git/HEAD",
		"my proj/z-hardlink.txt", "my proj/archive_manifest.json"}
	for _, n := range want {
		if _, ok := got[n]; !ok {
			t.Errorf("no member %q", n)
		}
	}
	if len(got) != len(want) {
		var all []string
		for _, m := range ms {
			all = append(all, m.hdr.Name)
		}
		t.Errorf("%d members, want %d:\n%s", len(got), len(want), strings.Join(all, "\n"))
	}
	if ms[0].hdr.Name != "my proj/" || ms[len(ms)-1].hdr.Name != "my proj/archive_manifest.json" {
		t.Errorf("first %q, last %q: want the root first and the manifest last", ms[0].hdr.Name, ms[len(ms)-1].hdr.Name)
	}
	if m := got["my proj/a.txt"]; !m.hdr.ModTime.Equal(mtime) {
		t.Errorf("a.txt: mtime %v", m.hdr.ModTime)
	}
	if m := got["my proj/with space.txt"]; m.hdr.Mode != 0o600 {
		t.Errorf("with space.txt mode %o", m.hdr.Mode)
	}
	// Whichever name of a hard-linked file comes second (in the
	// directory's order) is a link to the first.
	a, z := got["my proj/a.txt"], got["my proj/z-hardlink.txt"]
	if a.hdr.Typeflag == tar.TypeLink {
		a, z = z, a
	}
	if a.body != "alpha\n" || z.hdr.Typeflag != tar.TypeLink || z.hdr.Linkname != a.hdr.Name || z.hdr.Size != 0 {
		t.Errorf("a hard-linked pair: %q %c -> %q", z.hdr.Name, z.hdr.Typeflag, z.hdr.Linkname)
	}
	if m := got["my proj/empty/"]; m.hdr.Typeflag != tar.TypeDir {
		t.Errorf("empty/ type %c", m.hdr.Typeflag)
	}
	man := got["my proj/archive_manifest.json"]
	if man.hdr.Mode != 0o644 || man.hdr.Uid != 0 || man.hdr.Gid != 0 || man.hdr.Uname != "" || man.hdr.Gname != "" ||
		man.hdr.ModTime.Unix() != 0 || man.hdr.Typeflag != tar.TypeReg {
		t.Errorf("manifest header %+v, want tarfile.TarInfo's defaults", man.hdr)
	}
	// 8 regular files (6+7+2+19+1+3*21 bytes) and one link member, which
	// counts as a file of 0 bytes.
	wantManifest := `{
  "excludes": [
    "secrets/prod",
    "*.pyc",
    "dist/",
    "build/"
  ],
  "file_count": 9,
  "format": "tar.gz",
  "source": "my proj",
  "total_bytes": 98
}`
	if man.body != wantManifest {
		t.Errorf("manifest:\n%s\nwant:\n%s", man.body, wantManifest)
	}

	// The workspace's own archive_manifest.json wins: no synthetic one.
	writeFile(t, filepath.Join(root, "archive_manifest.json"), `{"mine": true}`)
	_, _, body = e.archiveRaw(url.Values{"path": {root}, "format": {"tar.gz"}})
	ms, _, _ = untarAll(t, body)
	count := 0
	for _, m := range ms {
		if m.hdr.Name == "my proj/archive_manifest.json" {
			count++
			if m.body != `{"mine": true}` {
				t.Errorf("the user's archive_manifest.json was replaced: %q", m.body)
			}
		}
	}
	if count != 1 {
		t.Errorf("%d archive_manifest.json members, want the user's only", count)
	}
}

// TestCopyExactly: a file that shrinks after its header is padded with
// NULs to the header's size, and one that grows is cut.
func TestCopyExactly(t *testing.T) {
	var b bytes.Buffer
	if err := copyExactly(&b, strings.NewReader("abc"), 6); err != nil || b.String() != "abc\x00\x00\x00" {
		t.Errorf("shrunk: %q %v", b.String(), err)
	}
	b.Reset()
	if err := copyExactly(&b, strings.NewReader("abcdef"), 4); err != nil || b.String() != "abcd" {
		t.Errorf("grown: %q %v", b.String(), err)
	}
}

// TestArchiveOfNarrowedRoot: a directory holding one repository two
// levels down is archived as that repository, in both formats, and the
// answer names the resolved path.
func TestArchiveOfNarrowedRoot(t *testing.T) {
	r := newRepo(t)
	e := newEnv(t, Config{})
	// Through a symlink: the path is resolved first.
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(r.parent, link); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"tar.gz", "git-delta"} {
		code, h, body := e.archiveRaw(url.Values{"path": {link}, "format": {format}})
		if code != 200 {
			t.Fatalf("%s: %d %s", format, code, body)
		}
		if got, _ := url.PathUnescape(h.Get("X-Archive-Repo-Root")); got != r.dir {
			t.Errorf("%s: X-Archive-Repo-Root %q, want %q", format, got, r.dir)
		}
		if !strings.Contains(h.Get("Content-Disposition"), `"proj.`) {
			t.Errorf("%s: Content-Disposition %q", format, h.Get("Content-Disposition"))
		}
	}
}
