package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// repo is a real git repository built with the git binary: a base commit
// that origin/main points at, a second commit on branch feature/naïve
// (pushed only up to the base: origin/feature/naïve is the base, which is
// what upstream's auto base picks without reaching the remote), then
// uncommitted changes (a modified file, an untracked text file, an
// untracked binary file, an ignored file and a node_modules file).
type repo struct {
	parent, dir    string
	base, head     string
	remote, branch string
}

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, p string, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipping: the git binary is needed to build a real repository for the archive tests")
	}
	parent := t.TempDir()
	r := &repo{parent: parent, dir: filepath.Join(parent, "work", "proj"),
		remote: "git@example.invalid:team/my repo.git", branch: "feature/naïve"}
	writeFile(t, filepath.Join(r.dir, "README.md"), "hello\n")
	writeFile(t, filepath.Join(r.dir, ".gitignore"), "*.log\n")
	writeFile(t, filepath.Join(r.dir, "src", "a.go"), "package a\n")
	gitT(t, r.dir, "init", "-q", "-b", "main")
	gitT(t, r.dir, "add", "-A")
	gitT(t, r.dir, "commit", "-q", "-m", "base")
	r.base = gitT(t, r.dir, "rev-parse", "HEAD")
	gitT(t, r.dir, "remote", "add", "origin", r.remote)
	gitT(t, r.dir, "update-ref", "refs/remotes/origin/main", r.base)
	gitT(t, r.dir, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
	gitT(t, r.dir, "checkout", "-q", "-b", r.branch)
	gitT(t, r.dir, "update-ref", "refs/remotes/origin/"+r.branch, r.base)
	writeFile(t, filepath.Join(r.dir, "src", "b.go"), "package a\n\nfunc B() {}\n")
	gitT(t, r.dir, "add", "-A")
	gitT(t, r.dir, "commit", "-q", "-m", "second")
	r.head = gitT(t, r.dir, "rev-parse", "HEAD")
	// Uncommitted work: exactly what an export must not lose.
	writeFile(t, filepath.Join(r.dir, "README.md"), "hello\nworld\n")
	writeFile(t, filepath.Join(r.dir, "notes.txt"), "untracked\n")
	writeFile(t, filepath.Join(r.dir, "blob.bin"), "\x00\x01\x02binary\xff\xfe")
	writeFile(t, filepath.Join(r.dir, "debug.log"), "ignored\n")
	writeFile(t, filepath.Join(r.dir, "node_modules", "dep", "index.js"), "module.exports = 1\n")
	writeFile(t, filepath.Join(r.dir, ".git", "credentials"), "https://user:tok@example.invalid\n")
	return r
}

// get fetches the archive route raw and returns status, headers, body.
func (e *env) archiveRaw(q url.Values) (int, http.Header, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/file/archive?"+q.Encode(), nil)
	if e.key != "" {
		req.Header.Set("X-Session-API-Key", e.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func TestArchiveGitDeltaAppliesOnBase(t *testing.T) {
	for _, pure := range []bool{false, true} {
		name := "git-binary"
		if pure {
			name = "pure-go"
		}
		t.Run(name, func(t *testing.T) { testGitDelta(t, pure) })
	}
}

// testGitDelta checks a git-delta by rebuilding the work tree from it: the
// base commit's tree plus `git apply` of the patch must equal what git
// itself would stage.
func testGitDelta(t *testing.T, pure bool) {
	r := newRepo(t)
	// More kinds of change: a deletion, a mode change, a symlink, an empty
	// file, a non-ASCII name, a tracked file that is ignored, nested
	// .gitignore rules with a negation. The third commit is after the base,
	// so to the scratch index (seeded from the base) its files are new.
	writeFile(t, filepath.Join(r.dir, "old.txt"), "to be deleted\n")
	writeFile(t, filepath.Join(r.dir, "run.sh"), "#!/bin/sh\n")
	writeFile(t, filepath.Join(r.dir, "kept.log"), "tracked though ignored\n")
	gitT(t, r.dir, "add", "-f", "old.txt", "run.sh", "kept.log")
	gitT(t, r.dir, "commit", "-q", "-m", "third")
	r.head = gitT(t, r.dir, "rev-parse", "HEAD")
	os.Remove(filepath.Join(r.dir, "old.txt"))
	os.Chmod(filepath.Join(r.dir, "run.sh"), 0o755)
	writeFile(t, filepath.Join(r.dir, "kept.log"), "tracked, ignored, changed\n")
	writeFile(t, filepath.Join(r.dir, "empty"), "")
	writeFile(t, filepath.Join(r.dir, "café.txt"), "crème\n")
	writeFile(t, filepath.Join(r.dir, "sub", ".gitignore"), "*.tmp\n!keep.tmp\n")
	writeFile(t, filepath.Join(r.dir, "sub", "drop.tmp"), "x\n")
	writeFile(t, filepath.Join(r.dir, "sub", "keep.tmp"), "y\n")
	if err := os.Symlink("README.md", filepath.Join(r.dir, "link")); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Config{Keys: []string{testKey}, PureGit: pure})
	e.clock.Advance(30 * time.Second)
	// The parent directory holds exactly one repository: it is found.
	code, h, patch := e.archiveRaw(url.Values{"path": {filepath.Dir(r.dir)}, "format": {"git-delta"}})
	if code != 200 {
		t.Fatalf("git-delta: %d %s", code, patch)
	}
	if e.idle() != 0 {
		t.Error("the archive route did not reset the idle clock")
	}
	if h.Get("Content-Type") != "text/x-patch; charset=utf-8" || h.Get("Content-Disposition") != `attachment; filename="proj.patch"` {
		t.Errorf("headers %v", h)
	}
	if h.Get("X-Archive-Base-Commit") != r.base || h.Get("X-Archive-Base-Ref") != "auto" {
		t.Errorf("base headers %q %q, want %s auto", h.Get("X-Archive-Base-Commit"), h.Get("X-Archive-Base-Ref"), r.base)
	}
	// Repository headers are percent-encoded like Python's quote(v, safe="").
	if got, want := h.Get("X-Archive-Repo-Root"), pyQuote(r.dir, ""); got != want || !strings.Contains(got, "%2F") {
		t.Errorf("X-Archive-Repo-Root %q, want %q", got, want)
	}
	if got := h.Get("X-Archive-Branch"); got != "feature%2Fna%C3%AFve" {
		t.Errorf("X-Archive-Branch %q", got)
	}
	if got, _ := url.PathUnescape(h.Get("X-Archive-Repo-Remote")); got != r.remote {
		t.Errorf("X-Archive-Repo-Remote decodes to %q, want %q", got, r.remote)
	}
	if h.Get("X-Archive-Head-Commit") != r.head {
		t.Errorf("X-Archive-Head-Commit %q, want %q", h.Get("X-Archive-Head-Commit"), r.head)
	}
	for _, leak := range []string{"debug.log", "node_modules", "credentials", "drop.tmp"} {
		if strings.Contains(string(patch), leak) {
			t.Errorf("patch includes %s", leak)
		}
	}
	// Rebuild: the base commit's tree plus the patch equals the work tree.
	out := t.TempDir()
	tarball := filepath.Join(t.TempDir(), "base.tar")
	gitT(t, r.dir, "archive", "-o", tarball, r.base)
	if b, err := exec.Command("tar", "-xf", tarball, "-C", out).CombinedOutput(); err != nil {
		t.Fatalf("untar base: %v %s", err, b)
	}
	pf := filepath.Join(t.TempDir(), "p.patch")
	os.WriteFile(pf, patch, 0o644)
	gitT(t, out, "init", "-q")
	gitT(t, out, "apply", "--binary", pf)
	for _, f := range []string{"README.md", "notes.txt", "blob.bin", "src/a.go", "src/b.go", "run.sh",
		"empty", "café.txt", "sub/.gitignore", "sub/keep.tmp"} {
		want, _ := os.ReadFile(filepath.Join(r.dir, f))
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s after applying the patch: %q (%v), want %q", f, got, err, want)
		}
	}
	// kept.log is tracked since the third commit but ignored, and absent
	// from the base: `git add -A` over the base's index skips it, so
	// upstream's patch loses it. old.txt came and went after the base.
	for _, f := range []string{"old.txt", "sub/drop.tmp", "debug.log", "kept.log"} {
		if _, err := os.Lstat(filepath.Join(out, f)); err == nil {
			t.Errorf("%s exists after applying the patch", f)
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "run.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("run.sh is not executable after applying the patch (%v)", err)
	}
	if target, err := os.Readlink(filepath.Join(out, "link")); err != nil || target != "README.md" {
		t.Errorf("link after applying: %q %v", target, err)
	}
	// The box's own index is untouched: notes.txt is still untracked.
	if st := gitT(t, r.dir, "status", "--porcelain", "notes.txt"); !strings.HasPrefix(st, "??") {
		t.Errorf("the archive changed the repository's index: %q", st)
	}

	// An explicit base_ref is echoed back.
	code, h, _ = e.archiveRaw(url.Values{"path": {r.dir}, "base_ref": {"main"}})
	if code != 200 || h.Get("X-Archive-Base-Ref") != "main" || h.Get("X-Archive-Base-Commit") != r.base {
		t.Errorf("base_ref=main: %d %v", code, h)
	}
	// A detached HEAD is its own base; the patch is the uncommitted work.
	gitT(t, r.dir, "checkout", "-q", "--detach")
	code, h, patch = e.archiveRaw(url.Values{"path": {r.dir}})
	if code != 200 || h.Get("X-Archive-Base-Commit") != r.head || h.Get("X-Archive-Branch") != "DETACHED" ||
		strings.Contains(string(patch), "src/b.go") || !strings.Contains(string(patch), "notes.txt") {
		t.Errorf("detached HEAD: %d %v\n%.300s", code, h, patch)
	}
}

func TestArchiveTarGzFullCapture(t *testing.T) {
	r := newRepo(t)
	e := newEnv(t, Config{})
	code, h, body := e.archiveRaw(url.Values{"path": {r.dir}, "format": {"tar.gz"}, "use_default_excludes": {"false"}})
	if code != 200 || h.Get("Content-Type") != "application/gzip" || h.Get("Content-Disposition") != `attachment; filename="proj.tar.gz"` {
		t.Fatalf("tar.gz: %d %v %.200s", code, h, body)
	}
	if h.Get("X-Archive-Base-Commit") != "" || h.Get("X-Archive-Head-Commit") != r.head {
		t.Errorf("tar.gz headers: %v", h)
	}
	files := untar(t, body)
	for _, want := range []string{"proj/README.md", "proj/debug.log", "proj/node_modules/dep/index.js", "proj/.git/HEAD", "proj/blob.bin"} {
		if _, ok := files[want]; !ok {
			t.Errorf("full capture lacks %s", want)
		}
	}
	for name := range files {
		if name == "proj/.git/config" || name == "proj/.git/credentials" || strings.Contains(name, "/.git/logs/") {
			t.Errorf("full capture includes %s", name)
		}
	}
	if files["proj/blob.bin"] != "\x00\x01\x02binary\xff\xfe" {
		t.Errorf("blob.bin = %q", files["proj/blob.bin"])
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(files["proj/archive_manifest.json"]), &m); err != nil {
		t.Fatalf("archive_manifest.json: %v", err)
	}
	if m["format"] != "tar.gz" || m["source"] != "proj" || m["file_count"].(float64) < 6 {
		t.Errorf("archive_manifest.json = %v", m)
	}
	if !strings.HasPrefix(files["proj/archive_manifest.json"], "{\n  \"excludes\": [],\n  \"file_count\": ") {
		t.Errorf("archive_manifest.json is not json.dumps(indent=2, sort_keys=True): %s", files["proj/archive_manifest.json"])
	}

	// Default excludes drop node_modules and .git.
	_, _, body = e.archiveRaw(url.Values{"path": {r.dir}, "format": {"tar.gz"}, "exclude": {"*.bin"}})
	files = untar(t, body)
	for name := range files {
		if strings.Contains(name, "node_modules") || strings.Contains(name, "/.git/") || strings.HasSuffix(name, ".bin") {
			t.Errorf("default excludes kept %s", name)
		}
	}
	if _, ok := files["proj/src/b.go"]; !ok {
		t.Error("default capture lacks src/b.go")
	}
}

func untar(t *testing.T, body []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[hdr.Name] = string(b)
	}
}

func TestArchiveErrors(t *testing.T) {
	r := newRepo(t)
	e := newEnv(t, Config{Keys: []string{testKey}})
	plain := t.TempDir()
	writeFile(t, filepath.Join(plain, "x.txt"), "x")
	two := t.TempDir()
	for _, d := range []string{"a", "b"} {
		gitT(t, two, "init", "-q", d)
	}
	cases := []struct {
		name   string
		q      url.Values
		code   int
		detail string
	}{
		{"relative", url.Values{"path": {"work/proj"}}, 400, "Path must be absolute"},
		{"missing dir", url.Values{"path": {filepath.Join(r.parent, "nope")}}, 404, "Directory not found"},
		{"file", url.Values{"path": {filepath.Join(r.dir, "README.md")}}, 400, "Path is not a directory"},
		{"not a repo", url.Values{"path": {plain}, "format": {"git-delta"}}, 400, "Not a git repository: Not a git repository: " + plain},
		{"two repos", url.Values{"path": {two}}, 400, "Not a git repository: Not a git repository: " + two},
		{"dash ref", url.Values{"path": {r.dir}, "base_ref": {"-x"}}, 400, "base_ref must not start with '-'"},
		{"dash ref, tar.gz", url.Values{"path": {r.dir}, "base_ref": {"-x"}, "format": {"tar.gz"}}, 400, "base_ref must not start with '-'"},
		{"quoted ref", url.Values{"path": {r.dir}, "base_ref": {"it's"}}, 400, `base_ref "it's" could not be resolved`},
		{"unknown ref", url.Values{"path": {r.dir}, "base_ref": {"nosuch"}}, 400, "base_ref 'nosuch' could not be resolved"},
		{"no path", url.Values{"format": {"tar.gz"}}, 422, ""},
		{"bad format", url.Values{"path": {r.dir}, "format": {"zip"}}, 422, ""},
		{"bad bool", url.Values{"path": {r.dir}, "use_default_excludes": {"maybe"}}, 422, ""},
	}
	for _, c := range cases {
		code, _, body := e.archiveRaw(c.q)
		var d struct {
			Detail json.RawMessage `json:"detail"`
		}
		json.Unmarshal(body, &d)
		if code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.code)
			continue
		}
		if want, _ := json.Marshal(c.detail); c.detail != "" && string(d.Detail) != string(want) {
			t.Errorf("%s: detail %s, want %q", c.name, d.Detail, c.detail)
		}
	}
	// A plain directory is still a full capture as tar.gz, without repo headers.
	code, h, _ := e.archiveRaw(url.Values{"path": {plain}, "format": {"tar.gz"}})
	if code != 200 || h.Get("X-Archive-Repo-Root") != "" {
		t.Errorf("tar.gz of a plain dir: %d %v", code, h)
	}
	pure := newEnv(t, Config{PureGit: true})
	if code, _, body := pure.archiveRaw(url.Values{"path": {r.dir}, "base_ref": {"nosuch"}}); code != 400 ||
		!strings.Contains(string(body), "could not be resolved") {
		t.Errorf("pure-Go unknown base_ref: %d %s", code, body)
	}
	e.key = "wrong"
	if code, _, _ := e.archiveRaw(url.Values{"path": {r.dir}}); code != 401 {
		t.Errorf("wrong key: %d", code)
	}
	// No temp files are left beside the archived directories.
	for _, d := range []string{filepath.Dir(r.dir), filepath.Dir(plain)} {
		ents, _ := os.ReadDir(d)
		for _, en := range ents {
			if strings.HasPrefix(en.Name(), "tmp") {
				t.Errorf("temp file %s left in %s", en.Name(), d)
			}
		}
	}
}

// TestScratchFile: the archive is built beside the directory (on the box's
// disk), except for the box's "/", which has no parent.
func TestScratchFile(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "ws")
	os.MkdirAll(target, 0o755)
	s, err := NewServer(Config{ConversationsPath: filepath.Join(t.TempDir(), "c")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.scratchFile(target, "tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Remove(f.Name())
	if filepath.Dir(f.Name()) != parent || !strings.HasSuffix(f.Name(), ".tar.gz") || !strings.HasPrefix(filepath.Base(f.Name()), "tmp") {
		t.Errorf("scratch file %s, want tmp*.tar.gz in %s", f.Name(), parent)
	}
	rooted, err := NewServer(Config{ConversationsPath: filepath.Join(t.TempDir(), "c"), FSRoot: target}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err = rooted.scratchFile(rooted.root.dir, "git-delta")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Remove(f.Name())
	if tmp, _ := pyTempDir(); filepath.Dir(f.Name()) != tmp || !strings.HasSuffix(f.Name(), ".patch") {
		t.Errorf("scratch file for the box's root %s, want one in %s", f.Name(), tmp)
	}
}

// TestArchiveSubdirectoryOfRepository: a git-delta of a directory inside a
// repository is that directory's part of the delta, without the
// repository headers (the directory holds no .git).
func TestArchiveSubdirectoryOfRepository(t *testing.T) {
	r := newRepo(t)
	for _, pure := range []bool{false, true} {
		e := newEnv(t, Config{PureGit: pure})
		code, h, body := e.archiveRaw(url.Values{"path": {filepath.Join(r.dir, "src")}})
		if code != 200 || !strings.Contains(string(body), "diff --git a/src/b.go b/src/b.go") || strings.Contains(string(body), "README.md") {
			t.Errorf("pure=%v: %d\n%s", pure, code, body)
		}
		if h.Get("X-Archive-Repo-Root") != "" || h.Get("X-Archive-Base-Commit") != r.base || !strings.Contains(h.Get("Content-Disposition"), `"src.patch"`) {
			t.Errorf("pure=%v: headers %v", pure, h)
		}
	}
}
