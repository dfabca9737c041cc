package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// defaultExcludes are upstream's default archive excludes: directory names
// (trailing slash) and file globs.
var defaultExcludes = []string{".git/", "node_modules/", ".venv/", "venv/", "__pycache__/", ".mypy_cache/",
	".pytest_cache/", ".ruff_cache/", "dist/", "build/", ".next/", "target/", "*.pyc"}

// neverArchived are the .git members that may hold credentials or
// machine-local state; they are left out even with excludes off.
var neverArchived = map[string]bool{"config": true, "config.worktree": true, "credentials": true,
	".git-credentials": true, "FETCH_HEAD": true}

// emptyTree is git's well-known empty tree object.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

type archiveParams struct {
	dir, format, baseRef string
	excludes             []string
}

// archive is GET /api/file/archive. It moves the idle clock (a file
// operation), resolves the repository root as upstream does, writes the
// archive to a temp file beside the archived directory (so the box's disk
// must hold it, as upstream) and streams that file.
func (s *Server) archive(w http.ResponseWriter, r *http.Request) {
	p, ok := archiveQuery(w, r)
	if !ok {
		return
	}
	s.touch()
	if !filepath.IsAbs(p.dir) {
		writeJSON(w, http.StatusBadRequest, detail("Path must be absolute"))
		return
	}
	dir, err := s.root.host(p.dir)
	var fi fs.FileInfo
	if err == nil {
		fi, err = os.Stat(dir)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errOutside):
		writeJSON(w, http.StatusNotFound, detail("Directory not found"))
		return
	case err != nil:
		internalError(w, err)
		return
	case !fi.IsDir():
		writeJSON(w, http.StatusBadRequest, detail("Path is not a directory"))
		return
	}
	root, nrepos := repoRoot(filepath.Clean(dir))
	isRepo := isDir(filepath.Join(root, ".git"))
	if p.format == "git-delta" {
		if strings.HasPrefix(p.baseRef, "-") {
			writeJSON(w, http.StatusBadRequest, detail("base_ref must not start with '-'"))
			return
		}
		if !isRepo || nrepos > 1 {
			writeJSON(w, http.StatusBadRequest, detail("Not a git repository: "+p.dir))
			return
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(root), ".archive-*")
	if err != nil {
		internalError(w, err)
		return
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	name := filepath.Base(root)
	h := w.Header()
	if isRepo {
		setRepoHeaders(h, root, s.root.box(root))
	}
	var ctype, fname string
	if p.format == "tar.gz" {
		err = writeTarGz(tmp, root, name, p.excludes)
		ctype, fname = "application/gzip", name+".tar.gz"
	} else {
		var base string
		if _, lerr := exec.LookPath("git"); lerr == nil && !s.cfg.PureGit {
			base, err = gitDelta(tmp, root, p.baseRef, p.excludes)
		} else {
			base, err = gitDeltaPure(tmp, root, p.baseRef, p.excludes)
		}
		var bad badRef
		if errors.As(err, &bad) {
			writeJSON(w, http.StatusBadRequest, detail(fmt.Sprintf("base_ref '%s' could not be resolved", p.baseRef)))
			return
		}
		if base != "" {
			h.Set("X-Archive-Base-Commit", base)
			ref := p.baseRef
			if ref == "" {
				ref = "auto"
			}
			h.Set("X-Archive-Base-Ref", ref)
		}
		ctype, fname = "text/x-patch", name+".patch"
	}
	if err != nil {
		for _, k := range []string{"X-Archive-Repo-Remote", "X-Archive-Branch", "X-Archive-Head-Commit",
			"X-Archive-Repo-Root", "X-Archive-Base-Commit", "X-Archive-Base-Ref"} {
			h.Del(k)
		}
		internalError(w, err)
		return
	}
	fileResponse(w, r, tmp, ctype, fname, nil)
}

func archiveQuery(w http.ResponseWriter, r *http.Request) (archiveParams, bool) {
	q := r.URL.Query()
	p := archiveParams{dir: q.Get("path"), format: q.Get("format"), baseRef: q.Get("base_ref")}
	if !q.Has("path") {
		writeJSON(w, http.StatusUnprocessableEntity, validation("missing", []any{"query", "path"}, "Field required", nil))
		return p, false
	}
	if p.format == "" {
		p.format = "git-delta"
	}
	if p.format != "git-delta" && p.format != "tar.gz" {
		writeJSON(w, http.StatusUnprocessableEntity, validation("literal_error", []any{"query", "format"},
			"Input should be 'git-delta' or 'tar.gz'", p.format))
		return p, false
	}
	useDefault := true
	if v := q.Get("use_default_excludes"); v != "" {
		b, ok := pyBool(v)
		if !ok {
			writeJSON(w, http.StatusUnprocessableEntity, validation("bool_parsing", []any{"query", "use_default_excludes"},
				"Input should be a valid boolean, unable to interpret input", v))
			return p, false
		}
		useDefault = b
	}
	if useDefault {
		p.excludes = append(p.excludes, defaultExcludes...)
	}
	p.excludes = append(p.excludes, q["exclude"]...)
	return p, true
}

// pyBool parses a query boolean as pydantic does.
func pyBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "true", "t", "yes", "y", "on":
		return true, true
	case "0", "false", "f", "no", "n", "off":
		return false, true
	}
	return false, false
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// repoRoot returns dir when it holds .git; else the one repository found
// at most 3 levels below it (skipping hidden and dependency directories);
// else dir. n is how many repositories were found below.
func repoRoot(dir string) (string, int) {
	if isDir(filepath.Join(dir, ".git")) {
		return dir, 1
	}
	skip := map[string]bool{"node_modules": true, "venv": true, "site-packages": true, "vendor": true}
	var found []string
	var walk func(d string, depth int)
	walk = func(d string, depth int) {
		if depth > 3 || len(found) > 1 {
			return
		}
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || skip[e.Name()] {
				continue
			}
			sub := filepath.Join(d, e.Name())
			if isDir(filepath.Join(sub, ".git")) {
				found = append(found, sub)
				continue
			}
			walk(sub, depth+1)
		}
	}
	walk(dir, 1)
	if len(found) == 1 {
		return found[0], 1
	}
	return dir, len(found)
}

// excluded says whether rel (slash-separated, relative to the root) is left
// out: a "name/" pattern drops a directory of that name anywhere, another
// pattern is a glob on the relative path or the base name.
func excluded(rel string, isDirectory bool, patterns []string) bool {
	base := path.Base(rel)
	for _, p := range patterns {
		if d, ok := strings.CutSuffix(p, "/"); ok {
			if isDirectory && base == d {
				return true
			}
			continue
		}
		if m, _ := path.Match(p, rel); m {
			return true
		}
		if m, _ := path.Match(p, base); m {
			return true
		}
	}
	return false
}

// gitSecret says whether rel is one of the .git members never archived.
func gitSecret(rel string) bool {
	parts := strings.Split(rel, "/")
	if parts[0] != ".git" || len(parts) < 2 {
		return false
	}
	if len(parts) == 2 && neverArchived[parts[1]] {
		return true
	}
	for _, p := range parts[1:] {
		if p == "logs" {
			return true
		}
	}
	return false
}

// writeTarGz writes root as a gzipped tar rooted at name/, regular files
// and directories only, then name/archive_manifest.json.
func writeTarGz(w io.Writer, root, name string, excludes []string) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	count, total := 0, int64(0)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if gitSecret(rel) || excluded(rel, d.IsDir(), excludes) || filepath.Base(p) == "archive_manifest.json" && !d.IsDir() && !strings.Contains(rel, "/") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil // symlinks and devices are skipped, as upstream
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		hdr.Name = name + "/" + rel
		hdr.Uname, hdr.Gname = "", ""
		if d.IsDir() {
			hdr.Name += "/"
			return tw.WriteHeader(hdr)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		n, err := io.CopyN(tw, f, hdr.Size)
		count++
		total += n
		return err
	})
	if err != nil {
		return err
	}
	if excludes == nil {
		excludes = []string{}
	}
	// encoding/json sorts map keys, as upstream's sort_keys=True.
	m, err := json.Marshal(map[string]any{"format": "tar.gz", "source": root, "file_count": count,
		"total_bytes": total, "excludes": excludes})
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name + "/archive_manifest.json", Mode: 0o644, Size: int64(len(m)),
		Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(m); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// setRepoHeaders sets the four percent-encoded repository headers, read
// from .git's files directly (the box image has no git binary). boxRoot
// is root as the box sees it.
func setRepoHeaders(h http.Header, root, boxRoot string) {
	gd := filepath.Join(root, ".git")
	h.Set("X-Archive-Repo-Root", pyQuote(boxRoot, ""))
	if remote := originURL(gd); remote != "" {
		h.Set("X-Archive-Repo-Remote", pyQuote(remote, ""))
	}
	head, _ := os.ReadFile(filepath.Join(gd, "HEAD"))
	ref, isRef := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	commit := ""
	if isRef {
		h.Set("X-Archive-Branch", pyQuote(strings.TrimPrefix(ref, "refs/heads/"), ""))
		commit = resolveRef(gd, ref)
	} else {
		commit = strings.TrimSpace(string(head))
	}
	if commit != "" {
		h.Set("X-Archive-Head-Commit", pyQuote(commit, ""))
	}
}

// resolveRef reads a loose ref, else packed-refs; "" for an unborn branch.
func resolveRef(gitDir, ref string) string {
	if b, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(ref))); err == nil {
		return strings.TrimSpace(string(b))
	}
	f, err := os.Open(filepath.Join(gitDir, "packed-refs"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sha, name, ok := strings.Cut(sc.Text(), " "); ok && name == ref {
			return sha
		}
	}
	return ""
}

// originURL reads remote.origin.url from .git/config.
func originURL(gitDir string) string {
	f, err := os.Open(filepath.Join(gitDir, "config"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			in = line == `[remote "origin"]`
			continue
		}
		if k, v, ok := strings.Cut(line, "="); in && ok && strings.TrimSpace(k) == "url" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

type badRef struct{ ref string }

func (b badRef) Error() string { return "cannot resolve " + b.ref }

// gitDelta writes `git diff --binary` of the work tree (untracked files
// included, .gitignore respected) against the base, built with a throwaway
// index so the box's own index is untouched. The base is base_ref when
// given; else HEAD when it is detached; else the merge-base with the
// branch's upstream or origin's HEAD; else the empty tree ("" returned). It
// needs the git binary; without one (the FROM-scratch box image) the
// archive route uses gitDeltaPure.
func gitDelta(w io.Writer, root, baseRef string, excludes []string) (base string, err error) {
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(errb.String()))
		}
		return strings.TrimSpace(out.String()), nil
	}
	switch {
	case baseRef != "":
		base, err = run(nil, "rev-parse", "--verify", "--quiet", baseRef+"^{commit}")
		if err != nil || base == "" {
			return "", badRef{baseRef}
		}
	default:
		if _, err := run(nil, "symbolic-ref", "-q", "HEAD"); err != nil {
			base, _ = run(nil, "rev-parse", "--verify", "--quiet", "HEAD") // detached
			break
		}
		for _, up := range []string{"@{upstream}", "refs/remotes/origin/HEAD"} {
			if mb, err := run(nil, "merge-base", "HEAD", up); err == nil && mb != "" {
				base = mb
				break
			}
		}
	}
	idx, err := os.CreateTemp("", "emu-index-*")
	if err != nil {
		return "", err
	}
	idx.Close()
	os.Remove(idx.Name()) // git wants to create it
	defer os.Remove(idx.Name())
	env := []string{"GIT_INDEX_FILE=" + idx.Name()}
	// Start from HEAD's tree, so tracked files stay even when ignored.
	if _, err := run(nil, "rev-parse", "--verify", "--quiet", "HEAD"); err == nil {
		if _, err := run(env, "read-tree", "HEAD"); err != nil {
			return "", err
		}
	}
	args := []string{"add", "-A", "--", "."}
	for _, e := range excludes {
		if e == ".git/" {
			continue
		}
		args = append(args, ":(exclude,glob)**/"+strings.TrimSuffix(e, "/")+func() string {
			if strings.HasSuffix(e, "/") {
				return "/**"
			}
			return ""
		}())
	}
	if _, err := run(env, args...); err != nil {
		return "", err
	}
	against := base
	if against == "" {
		against = emptyTree
	}
	cmd := exec.Command("git", "-C", root, "diff", "--binary", "--cached", "--no-color", "--no-ext-diff", against)
	cmd.Env = append(os.Environ(), env...)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git diff: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	return base, nil
}
