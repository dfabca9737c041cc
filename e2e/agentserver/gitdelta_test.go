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

// deltaHeaders reduces a patch to its per-file header lines (paths, modes,
// blob ids): what git's and the pure-Go writer's patches must agree on,
// whatever form their hunks take. Ids are cut to 7 digits: git writes
// full ones only for binary files, the pure-Go writer (whose hunks are
// all binary) always.
func deltaHeaders(patch string) []string {
	var out []string
	for line := range strings.SplitSeq(patch, "\n") {
		if ids, ok := strings.CutPrefix(line, "index "); ok {
			ids, mode, _ := strings.Cut(ids, " ")
			a, b, _ := strings.Cut(ids, "..")
			line = strings.TrimSpace("index " + a[:min(7, len(a))] + ".." + b[:min(7, len(b))] + " " + mode)
		}
		for _, p := range []string{"diff --git ", "new file mode ", "deleted file mode ", "old mode ", "new mode ", "index ", "+Subproject commit "} {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
			}
		}
	}
	return out
}

// TestGitDeltaPureMatchesGit runs both git-delta writers on the same
// repositories and compares what they say: status, base headers, and the
// header lines of every file in the patch. The git binary's answer is
// upstream's by construction (the same commands).
func TestGitDeltaPureMatchesGit(t *testing.T) {
	// want says which commit the base must be (fields of the repo).
	base := func(r *repo) string { return r.base }
	none := func(*repo) string { return "" }
	scenarios := []struct {
		name  string
		want  func(*repo) string
		setup func(t *testing.T, r *repo) url.Values
	}{
		{"pushed base", base, func(t *testing.T, r *repo) url.Values {
			return url.Values{"path": {r.dir}}
		}},
		{"unpushed branch, remote unreachable: the empty tree", none, func(t *testing.T, r *repo) url.Values {
			gitT(t, r.dir, "update-ref", "-d", "refs/remotes/origin/"+r.branch)
			return url.Values{"path": {r.dir}}
		}},
		{"the remote's default branch, from a remote on this machine", base, func(t *testing.T, r *repo) url.Values {
			gitT(t, r.dir, "update-ref", "-d", "refs/remotes/origin/"+r.branch)
			bare := filepath.Join(t.TempDir(), "remote.git")
			gitT(t, r.parent, "clone", "-q", "--bare", r.dir, bare)
			gitT(t, bare, "symbolic-ref", "HEAD", "refs/heads/main")
			gitT(t, r.dir, "remote", "set-url", "origin", bare)
			return url.Values{"path": {r.dir}}
		}},
		{"a fresh repository without commits", none, func(t *testing.T, r *repo) url.Values {
			fresh := filepath.Join(t.TempDir(), "fresh")
			writeFile(t, filepath.Join(fresh, "a.txt"), "a\n")
			writeFile(t, filepath.Join(fresh, "x.log"), "ignored\n")
			writeFile(t, filepath.Join(fresh, ".gitignore"), "*.log\n")
			gitT(t, fresh, "init", "-q")
			return url.Values{"path": {fresh}, "base_ref": {"HEAD"}}
		}},
		{"a subdirectory of the repository", base, func(t *testing.T, r *repo) url.Values {
			writeFile(t, filepath.Join(r.dir, "src", "new.go"), "package a\n")
			writeFile(t, filepath.Join(r.dir, "src", "deep", "d.go"), "package deep\n")
			return url.Values{"path": {filepath.Join(r.dir, "src")}, "exclude": {"deep/"}}
		}},
		{"excludes: dir-only, anchored, bare", base, func(t *testing.T, r *repo) url.Values {
			writeFile(t, filepath.Join(r.dir, "build"), "a file named build\n")
			writeFile(t, filepath.Join(r.dir, "out", "build", "x.o"), "obj\n")
			writeFile(t, filepath.Join(r.dir, "secrets", "prod", "k"), "k\n")
			writeFile(t, filepath.Join(r.dir, "a", "secrets", "prod", "k"), "k\n")
			writeFile(t, filepath.Join(r.dir, "x.pyc"), "pyc")
			os.Remove(filepath.Join(r.dir, "src", "a.go")) // a deletion
			return url.Values{"path": {r.dir}, "exclude": {"secrets/prod", "*.bin"}}
		}},
		{"an embedded repository and a detached HEAD", func(r *repo) string { return r.head }, func(t *testing.T, r *repo) url.Values {
			emb := filepath.Join(r.dir, "lib", "inner")
			writeFile(t, filepath.Join(emb, "i.txt"), "inner\n")
			gitT(t, emb, "init", "-q")
			gitT(t, emb, "add", "-A")
			gitT(t, emb, "commit", "-q", "-m", "inner")
			gitT(t, r.dir, "checkout", "-q", "--detach")
			return url.Values{"path": {r.dir}}
		}},
		{"an explicit base by abbreviated id", base, func(t *testing.T, r *repo) url.Values {
			return url.Values{"path": {r.dir}, "base_ref": {r.base[:10]}}
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			r := newRepo(t)
			q := sc.setup(t, r)
			var answers [2]struct {
				code    int
				base    string
				ref     string
				headers []string
			}
			for i, pure := range []bool{false, true} {
				e := newEnv(t, Config{PureGit: pure})
				code, h, body := e.archiveRaw(q)
				answers[i].code, answers[i].base, answers[i].ref = code, h.Get("X-Archive-Base-Commit"), h.Get("X-Archive-Base-Ref")
				answers[i].headers = deltaHeaders(string(body))
				if code != 200 {
					t.Fatalf("pure=%v: %d %s", pure, code, body)
				}
			}
			git, pure := answers[0], answers[1]
			if want := sc.want(r); git.base != want {
				t.Errorf("git's base %q, want %q", git.base, want)
			}
			if git.base != pure.base || git.ref != pure.ref {
				t.Errorf("base headers: git %q %q, pure-Go %q %q", git.base, git.ref, pure.base, pure.ref)
			}
			if strings.Join(git.headers, "\n") != strings.Join(pure.headers, "\n") {
				t.Errorf("patch headers differ:\ngit:\n%s\npure-Go:\n%s", strings.Join(git.headers, "\n"), strings.Join(pure.headers, "\n"))
			}
			if len(git.headers) == 0 {
				t.Errorf("an empty patch: the scenario tests nothing")
			}
			t.Logf("base %q (%s), %d header lines", git.base, git.ref, len(git.headers))
		})
	}
}
