package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tests of what an export holds and what a restore brings back
// (issue 20). Their oracle is the box's own disk: for the Daytona farm
// that is a directory on this machine (<box dir>/workspace stands for the
// box's /workspace), so every regular file the box had is compared with
// the export's archive, byte for byte, whatever the layout.

// layout makes a workspace's files under dir (the box's /workspace).
type layout struct {
	name string
	make func(t *testing.T, dir string)
	// narrowed is the repository the agent-server narrows its archive of
	// /workspace to ("" when it does not).
	narrowed string
	// symlinks are paths that must not be in the export.
	symlinks []string
}

// gitRepo makes dir a git repository with one commit of files and then
// edits one of them without committing, as an agent leaves its work.
func gitRepo(t *testing.T, dir string, files map[string]string, edit string) {
	t.Helper()
	writeTree(t, dir, files)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=e2e@companion", "-c", "user.name=e2e"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("remote", "add", "origin", "https://example.com/e2e/repo.git")
	git("add", "-A")
	git("commit", "-q", "-m", "first")
	if edit != "" {
		writeTree(t, dir, map[string]string{edit: "uncommitted edit\n"})
	}
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func randomBytes(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return string(b)
}

// layouts are the workspaces of issue 20's list.
func layouts() []layout {
	return []layout{
		{name: "repo-and-neighbours", narrowed: "/workspace/repo", make: func(t *testing.T, d string) {
			gitRepo(t, filepath.Join(d, "repo"), map[string]string{"main.go": "package main\n", "docs/readme.md": "# r\n"}, "main.go")
			writeTree(t, d, map[string]string{"notes.txt": "notes beside the repo\n", "data/blob.bin": randomBytes(300 << 10),
				".env.local": "hidden file at the root\n", "data/nested/deep.txt": "deep\n"})
			os.MkdirAll(filepath.Join(d, "empty-dir"), 0o755)
		}},
		{name: "two-repos", make: func(t *testing.T, d string) {
			gitRepo(t, filepath.Join(d, "one"), map[string]string{"a.txt": "a\n"}, "a.txt")
			gitRepo(t, filepath.Join(d, "two"), map[string]string{"b.txt": "b\n"}, "")
			writeTree(t, d, map[string]string{"top.txt": "top\n"})
		}},
		{name: "repo-at-depth-3", narrowed: "/workspace/a/b/repo", make: func(t *testing.T, d string) {
			gitRepo(t, filepath.Join(d, "a/b/repo"), map[string]string{"r.txt": "r\n"}, "r.txt")
			writeTree(t, d, map[string]string{"top.txt": "top\n", "a/side.txt": "side\n", "a/b/beside.txt": "beside\n",
				"x/y/z.txt": "elsewhere\n", "a/other/o.txt": "other\n"})
		}},
		{name: "repo-at-depth-4", make: func(t *testing.T, d string) {
			gitRepo(t, filepath.Join(d, "a/b/c/repo"), map[string]string{"r.txt": "r\n"}, "r.txt")
			writeTree(t, d, map[string]string{"top.txt": "top\n", "a/b/c/near.txt": "near\n"})
		}},
		{name: "empty", make: func(t *testing.T, d string) {}},
		{name: "symlinks", narrowed: "/workspace/repo", symlinks: []string{"link-to-notes", "data/link-to-dir"}, make: func(t *testing.T, d string) {
			gitRepo(t, filepath.Join(d, "repo"), map[string]string{"r.txt": "r\n"}, "")
			writeTree(t, d, map[string]string{"notes.txt": "notes\n", "data/kept.txt": "kept\n"})
			if err := os.Symlink("notes.txt", filepath.Join(d, "link-to-notes")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../repo", filepath.Join(d, "data/link-to-dir")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "odd-names", narrowed: "/workspace/my repo", make: func(t *testing.T, d string) {
			gitRepo(t, filepath.Join(d, "my repo"), map[string]string{"ça va.txt": "oui\n"}, "ça va.txt")
			writeTree(t, d, map[string]string{"my notes.txt": "spaces\n", "naïve ünïcode.md": "accents\n", "日本語.txt": "kanji\n",
				"with space/inner file": "inner\n", "quote's \"file\"": "quotes\n", "-dash-first": "dash\n"})
		}},
	}
}

// TestDeleteExportHoldsEveryFile: through the binary, the Daytona
// emulator and an agent-server emulator per box, a workspace of each
// layout of issue 20 is deleted (preview, then the delete); its verified
// export's tar.gz holds every regular file the box's /workspace held,
// byte for byte, and nothing else but the agent-server's own manifest:
// files beside a repository the agent-server narrowed its archive to,
// two repositories, repositories three and four levels down, an empty
// workspace, names with spaces, quotes and non-ASCII. Symbolic links are
// not kept, and the preview said so. The index lists every file with its
// SHA-256; the manifest says how the archive was made and, for the
// git-delta, its base.
func TestDeleteExportHoldsEveryFile(t *testing.T) {
	f := newFarm(t)
	p := start(t, options{dataDir: t.TempDir()})
	acct := f.account(p)
	type made struct {
		l       layout
		id, box string
		want    map[string]string
	}
	var all []made
	for _, l := range layouts() {
		id, box := f.workspaceWith(p, acct, l.name, l.make)
		all = append(all, made{l, id, box, hostTree(t, f.workspaceDir(box))})
	}
	for _, m := range all {
		pv := p.deleteConfirmed(m.id)
		lost := strings.Join(pv.Lost, "\n")
		if !strings.Contains(lost, "symbolic links") || !strings.Contains(lost, ".git/config") || strings.Contains(lost, "git internals") {
			t.Errorf("%s: the preview does not say exactly what is lost (symbolic links, git's credential files):\n%s", m.l.name, lost)
		}
	}
	for _, m := range all {
		l := m.l
		p.waitRemoved(m.id, 2*time.Minute)
		exps := p.verifiedExports(m.id)
		if len(exps) != 1 {
			t.Fatalf("%s: verified exports: %+v", l.name, exps)
		}
		files, dirs := p.exportArchive(exps[0])
		compareTrees(t, l.name, m.want, files)
		for _, s := range l.symlinks {
			if _, ok := files[s]; ok || dirs[s] {
				t.Errorf("%s: the symlink %s is in the export", l.name, s)
			}
		}
		if l.name == "repo-and-neighbours" && !dirs["empty-dir"] {
			t.Errorf("%s: the empty directory is not in the export: %v", l.name, dirs)
		}
		man := p.exportManifest(exps[0])
		if man.Workspace.NarrowedTo != l.narrowed {
			t.Errorf("%s: the manifest says narrowed to %q, want %q", l.name, man.Workspace.NarrowedTo, l.narrowed)
		}
		p.checkIndex(l.name, exps[0], files)
		for _, fl := range man.Files {
			if fl.Format == "git-delta" && fl.Base != "commit" && fl.Base != "empty tree" {
				t.Errorf("%s: git-delta without its base: %+v", l.name, fl)
			}
		}
	}
}

// TestDeleteBlockedWhenTheRestCannotBeListed: the agent-server narrows
// its archive to the repository, and the box answers its bash route 404,
// so the rest of /workspace cannot be listed: the delete is blocked (the
// account's export is required), its reason names the repository that
// was archived and what would be lost, and the box stays.
func TestDeleteBlockedWhenTheRestCannotBeListed(t *testing.T) {
	f := newFarm(t)
	p := start(t, options{dataDir: t.TempDir()})
	acct := f.account(p)
	id, box := f.workspaceWith(p, acct, "no shell", layouts()[0].make)
	f.box(box).noShell = true
	p.deleteConfirmed(id)
	ws := p.waitBlocked(id, 2*time.Minute)
	for _, want := range []string{"archived only the repository /workspace/repo", "data/", "would be lost", "best_effort"} {
		if !strings.Contains(ws.Error, want) {
			t.Errorf("the blocked delete's reason does not say %q: %s", want, ws.Error)
		}
	}
	if f.gone(box) {
		t.Fatal("the box was deleted although the rest of its workspace could not be captured")
	}
	if len(p.verifiedExports(id)) != 0 {
		t.Error("a failed export is listed as verified")
	}
}

// workspaceWith creates a workspace on the farm whose box's /workspace
// holds what mk makes (and no seeded repository), and returns its id and
// box.
func (f *farm) workspaceWith(p *proc, acct, name string, mk func(t *testing.T, dir string)) (string, string) {
	p.t.Helper()
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": name}, &created)
	box := p.waitState(created.Workspace.ID, "running", time.Minute).BoxID
	f.box(box).noSeed = true
	dir := f.workspaceDir(box)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	mk(p.t, dir)
	return created.Workspace.ID, box
}

// workspaceDir is the directory that stands for a farm box's /workspace.
func (f *farm) workspaceDir(box string) string { return filepath.Join(f.root, box, "workspace") }

// neverArchivedHere says whether rel (below a workspace) is a file the
// agent-server never archives: git's credential-bearing files and
// reflogs, in any .git directory.
func neverArchivedHere(rel string) bool {
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		if p != ".git" || i == len(parts)-1 {
			continue
		}
		inner := parts[i+1:]
		if slices.Contains(inner, "logs") {
			return true
		}
		switch inner[len(inner)-1] {
		case "config", "config.worktree", "credentials", ".git-credentials", "FETCH_HEAD":
			return true
		}
	}
	return false
}

// hostTree reads every regular file below dir (symbolic links are not
// followed nor kept), relative paths to contents. The agent-server's own
// record of bash commands (bash_events/, in the workspace as in the real
// image) is left out: the listing commands an export runs add to it
// while it runs.
func hostTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if neverArchivedHere(rel) || strings.HasPrefix(rel, "bash_events/") {
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// compareTrees reports every file missing from got, differing, or extra.
func compareTrees(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for p, body := range want {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s: %s is missing", what, p)
		case g != body:
			t.Errorf("%s: %s differs: %d bytes, want %d", what, p, len(g), len(body))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok && !strings.HasPrefix(p, "bash_events/") {
			t.Errorf("%s: %s is there but was not in the box", what, p)
		}
	}
}

// exportArchive downloads an export's workspace.tar.gz and returns its
// regular files (paths below its top directory) and directories, leaving
// out the agent-server's own manifest (the last member, dated 1970).
func (p *proc) exportArchive(e exportRec) (map[string]string, map[string]bool) {
	p.t.Helper()
	resp, raw := p.get("/v1/exports/"+e.ID+"/files/workspace.tar.gz", nil)
	if resp.StatusCode != 200 {
		p.t.Fatalf("download workspace.tar.gz: %d %s", resp.StatusCode, raw)
	}
	return untar(p.t, raw)
}

func untar(t *testing.T, raw []byte) (map[string]string, map[string]bool) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files, dirs := map[string]string{}, map[string]bool{}
	var last string
	var lastEpoch bool
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_, rel, _ := strings.Cut(strings.TrimSuffix(h.Name, "/"), "/")
		switch h.Typeflag {
		case tar.TypeDir:
			if rel != "" {
				dirs[rel] = true
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[rel] = string(b)
		default:
			t.Errorf("member %s of type %q", h.Name, h.Typeflag)
		}
		last, lastEpoch = rel, h.ModTime.Unix() == 0
	}
	if last == "archive_manifest.json" && lastEpoch {
		delete(files, last)
	}
	return files, dirs
}

// exportManifest is the part of an export's manifest.json these tests read.
type manifestDoc struct {
	Files []struct {
		Name       string `json:"name"`
		Format     string `json:"format"`
		Base       string `json:"base"`
		BaseCommit string `json:"base_commit"`
	} `json:"files"`
	Workspace struct {
		Path       string `json:"path"`
		NarrowedTo string `json:"narrowed_to"`
		Skipped    []struct{ Path, Type string }
	} `json:"workspace"`
}

func (p *proc) exportManifest(e exportRec) manifestDoc {
	p.t.Helper()
	resp, raw := p.get("/v1/exports/"+e.ID+"/files/manifest.json", nil)
	var m manifestDoc
	if resp.StatusCode != 200 || json.Unmarshal(raw, &m) != nil {
		p.t.Fatalf("manifest.json: %d %s", resp.StatusCode, raw)
	}
	return m
}

// checkIndex reads the export's index and checks it lists exactly the
// archive's files with their SHA-256.
func (p *proc) checkIndex(what string, e exportRec, files map[string]string) {
	p.t.Helper()
	resp, raw := p.get("/v1/exports/"+e.ID+"/files/workspace.files.jsonl", nil)
	if resp.StatusCode != 200 {
		p.t.Fatalf("workspace.files.jsonl: %d %s", resp.StatusCode, raw)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if line == "" {
			continue
		}
		var ent struct{ Path, Type, SHA256 string }
		if err := json.Unmarshal([]byte(line), &ent); err != nil {
			p.t.Fatalf("index line %q: %v", line, err)
		}
		if ent.Type != "file" {
			continue
		}
		seen++
		if body, ok := files[ent.Path]; !ok || sum([]byte(body)) != ent.SHA256 {
			p.t.Errorf("%s: index entry %s does not match the archive", what, ent.Path)
		}
	}
	if seen != len(files) {
		p.t.Errorf("%s: the index lists %d files, the archive holds %d", what, seen, len(files))
	}
}
