package main

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFSRootMapping(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "workspace", "real"), 0o755)
	os.Symlink("real", filepath.Join(dir, "workspace", "rel-link"))
	os.Symlink(filepath.Join(dir, "workspace", "real"), filepath.Join(dir, "workspace", "abs-link-in"))
	os.Symlink(outside, filepath.Join(dir, "workspace", "abs-link-out"))
	os.Symlink("../../..", filepath.Join(dir, "workspace", "up"))
	os.Symlink(filepath.Join(outside, "new"), filepath.Join(dir, "workspace", "dangling-out"))
	os.Symlink("real/new", filepath.Join(dir, "workspace", "dangling-in"))
	r, err := newFSRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	for box, want := range map[string]string{
		"/":                         real,
		"/workspace":                filepath.Join(real, "workspace"),
		"/workspace/not/yet":        filepath.Join(real, "workspace", "not", "yet"),
		"/workspace/rel-link/x":     filepath.Join(real, "workspace", "real", "x"),
		"/workspace/abs-link-in":    filepath.Join(real, "workspace", "real"),
		"/workspace/dangling-in":    filepath.Join(real, "workspace", "real", "new"),
		"/workspace/../workspace/.": filepath.Join(real, "workspace"),
	} {
		got, err := r.host(box)
		if err != nil || got != want {
			t.Errorf("host(%q) = %q, %v; want %q", box, got, err, want)
		}
		if err == nil && r.box(got) != filepath.Clean(box) && !strings.Contains(box, "link") && !strings.Contains(box, "dangling") {
			t.Errorf("box(host(%q)) = %q", box, r.box(got))
		}
	}
	for _, box := range []string{"/..", "/../etc", "/workspace/abs-link-out", "/workspace/abs-link-out/x", "/workspace/up",
		"/workspace/up/etc/passwd", "/workspace/dangling-out"} {
		if got, err := r.host(box); !errors.Is(err, errOutside) {
			t.Errorf("host(%q) = %q, %v; want errOutside", box, got, err)
		}
	}
	// lhost does not follow the last component.
	if got, _ := r.lhost("/workspace/abs-link-out"); got != filepath.Join(real, "workspace", "abs-link-out") {
		t.Errorf("lhost of a symlink: %q", got)
	}
	if r.box(filepath.Join(real, "workspace")) != "/workspace" || r.box(real) != "/" {
		t.Error("box() does not strip the root")
	}
	// No root: paths are untouched.
	var none fsRoot
	if got, _ := none.host("/a/../b"); got != "/a/../b" || none.box("/x") != "/x" {
		t.Error("no root changes paths")
	}
	if _, err := newFSRoot(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing root is accepted")
	}
}

// TestFSRootRoutes: under EMULATOR_FS_ROOT every route takes box paths and
// answers with box paths; escapes are not found.
func TestFSRootRoutes(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.txt"), "secret")
	writeFile(t, filepath.Join(dir, "workspace", "notes.txt"), "hello")
	os.MkdirAll(filepath.Join(dir, "workspace", "proj"), 0o755)
	os.Symlink(outside, filepath.Join(dir, "workspace", "escape"))
	e := newEnv(t, Config{FSRoot: dir, SeedRepo: "/workspace/repo"})

	// The seed repository is a box path too.
	if _, err := os.Stat(filepath.Join(dir, "workspace", "repo", ".git", "HEAD")); err != nil {
		t.Fatalf("seed repository not under the root: %v", err)
	}
	code, h, body := e.archiveRaw(url.Values{"path": {"/workspace"}, "format": {"tar.gz"}})
	if code != 200 {
		t.Fatalf("archive: %d %s", code, body)
	}
	if got := h.Get("X-Archive-Repo-Root"); got != "%2Fworkspace%2Frepo" {
		t.Errorf("X-Archive-Repo-Root %q, want the box path", got)
	}
	files := untar(t, body)
	if _, ok := files["repo/notes.md"]; !ok {
		t.Errorf("the archive of the seeded repository lacks notes.md")
	}
	code, h, _ = e.archiveRaw(url.Values{"path": {"/workspace/repo"}, "format": {"git-delta"}})
	if code != 200 || h.Get("X-Archive-Base-Commit") == "" {
		t.Errorf("git-delta under the root: %d %v", code, h)
	}
	code, _, body = e.archiveRaw(url.Values{"path": {"/workspace/proj"}, "format": {"git-delta"}})
	if code != 400 || detailOf(body) != "Not a git repository: Not a git repository: /workspace/proj" {
		t.Errorf("a non-repository under the root: %d %s", code, body)
	}
	for _, p := range []string{"/workspace/escape", "/../" + filepath.Base(outside), "/nope"} {
		if code, _, body := e.archiveRaw(url.Values{"path": {p}, "format": {"tar.gz"}}); code != 404 || detailOf(body) != "Directory not found" {
			t.Errorf("archive of %s: %d %s", p, code, body)
		}
	}

	if code, _, b := e.raw("GET", "/api/file/download?path=/workspace/notes.txt", nil, nil); code != 200 || string(b) != "hello" {
		t.Errorf("download: %d %s", code, b)
	}
	if code, _, b := e.raw("GET", "/api/file/download?path=/workspace/escape/secret.txt", nil, nil); code != 404 {
		t.Errorf("download through an escaping symlink: %d %s", code, b)
	}
	if code, b := e.upload("/workspace/up/loaded.txt", formPart{name: "file", filename: "x", file: true, body: strings.NewReader("up")}); code != 200 {
		t.Errorf("upload: %d %s", code, b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "workspace", "up", "loaded.txt")); string(b) != "up" {
		t.Errorf("uploaded under the root: %q", b)
	}
	if code, b := e.upload("/workspace/escape/evil.txt", formPart{name: "file", filename: "x", file: true, body: strings.NewReader("x")}); code != 500 {
		t.Errorf("upload through an escaping symlink: %d %s", code, b)
	}
	if _, err := os.Stat(filepath.Join(outside, "evil.txt")); err == nil {
		t.Error("an upload escaped the root")
	}
	if code, b := e.do("POST", "/api/file/create_directory?path=/workspace/made/deep", nil, nil); code != 200 {
		t.Errorf("create_directory: %d %s", code, b)
	}
	if fi, err := os.Stat(filepath.Join(dir, "workspace", "made", "deep")); err != nil || !fi.IsDir() {
		t.Errorf("create_directory under the root: %v", err)
	}
	var page subdirPage
	if code, b := e.do("GET", "/api/file/search_subdirs?path=/workspace", nil, &page); code != 200 || len(page.Items) == 0 ||
		page.Items[0].Path != "/workspace/"+page.Items[0].Name {
		t.Errorf("search_subdirs: %d %s", code, b)
	}

	// The shell works in box paths.
	o := e.bash(map[string]any{"command": "cd /workspace && pwd && printf made > /workspace/by-shell.txt && echo *.txt && [ -e /workspace/escape/secret.txt ] || echo no-escape",
		"cwd": "/"})
	if o.out() != "/workspace\nby-shell.txt notes.txt\nno-escape\n" {
		t.Errorf("shell under the root: %q %q", o.out(), o.err())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "workspace", "by-shell.txt")); string(b) != "made" {
		t.Errorf("the shell's redirect went elsewhere: %q", b)
	}
	o = e.bash(map[string]any{"command": "rm /workspace/notes.txt && chmod 600 /workspace/by-shell.txt && printf x > /workspace/escape/evil2; echo $?",
		"cwd": "/workspace/proj"})
	if _, err := os.Stat(filepath.Join(dir, "workspace", "notes.txt")); err == nil {
		t.Errorf("rm of an absolute box path: %q %q", o.out(), o.err())
	}
	if fi, _ := os.Stat(filepath.Join(dir, "workspace", "by-shell.txt")); fi.Mode().Perm() != 0o600 {
		t.Errorf("chmod of an absolute box path: %v", fi.Mode())
	}
	if _, err := os.Stat(filepath.Join(outside, "evil2")); err == nil || !strings.HasSuffix(o.out(), "1\n") {
		t.Errorf("a redirect escaped the root: %q %q", o.out(), o.err())
	}
	if o := e.bash(map[string]any{"command": "pwd"}); o.code() != 0 {
		t.Errorf("default cwd under the root: %+v", o)
	}
	if o := e.bash(map[string]any{"command": "pwd", "cwd": "/workspace/escape"}); o.code() != -1 {
		t.Errorf("an escaping cwd: %q", o.out())
	}
	// rm -rf / would be the whole root: refused, as GNU rm refuses it.
	if o := e.bash(map[string]any{"command": "rm -rf / //; echo $?", "cwd": "/workspace"}); o.out() != "1\n" {
		t.Errorf("rm -rf /: %q %q", o.out(), o.err())
	}
	if _, err := os.Stat(filepath.Join(dir, "workspace", "by-shell.txt")); err != nil {
		t.Fatalf("rm -rf / removed the root's files: %v", err)
	}
	// /dev/null is the host's.
	if o := e.bash(map[string]any{"command": "echo gone > /dev/null; echo kept"}); o.out() != "kept\n" {
		t.Errorf("/dev/null: %q %q", o.out(), o.err())
	}
}
