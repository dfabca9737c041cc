package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// archive is GET /api/file/archive, as upstream's archive_directory:
//
//  1. query validation (422), then the idle clock moves (a file operation);
//  2. 400 "Path must be absolute", 404 "Directory not found", 400 "Path is
//     not a directory", 400 for a base_ref starting with "-" (any format);
//  3. the path is resolved (symlinks followed), and the archive is built in
//     a temporary file in its parent directory when that is writable (so
//     the box's disk must hold it), else in the system temp directory;
//  4. the root is narrowed to the one repository below the path (see
//     repoRoot), and archived as git-delta or tar.gz;
//  5. the repository headers when the root holds a .git, percent-encoded;
//     the base headers for a git-delta with a base commit.
//
// Paths in answers are box paths (see fsRoot).
func (s *Server) archive(w http.ResponseWriter, r *http.Request) {
	p, ok := archiveQuery(w, r)
	if !ok {
		return
	}
	s.touch()
	target, ok := s.archiveTarget(w, p)
	if !ok {
		return
	}
	tmp, err := s.scratchFile(target, p.format)
	if err != nil {
		unhandled(w, err.Error())
		return
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()

	a := archiveJob{root: repoRoot(target), params: p, pure: s.cfg.PureGit || !haveGit()}
	a.boxRoot = s.root.box(a.root)
	if s.root.mapped() {
		a.ceiling = filepath.Dir(s.root.dir) // git looks no higher than the box's "/"
	}
	base, err := s.buildArchive(r.Context(), tmp, a)
	if err != nil {
		s.archiveError(w, a, err)
		return
	}
	fileResponse(w, r, tmp, a.mediaType(), a.name()+a.suffix(), a.headers(r.Context(), base))
}

// archiveTarget checks the path and returns it resolved (a host path).
func (s *Server) archiveTarget(w http.ResponseWriter, p archiveParams) (string, bool) {
	host, fi, ok, err := s.boxStat(w, p.path)
	if !ok {
		return "", false
	}
	switch {
	case err != nil && missing(err):
		httpError(w, http.StatusNotFound, "Directory not found")
		return "", false
	case err != nil:
		unhandled(w, pyOSError(err, p.path))
		return "", false
	case !fi.IsDir():
		httpError(w, http.StatusBadRequest, "Path is not a directory")
		return "", false
	case p.baseRef != nil && strings.HasPrefix(*p.baseRef, "-"):
		httpError(w, http.StatusBadRequest, "base_ref must not start with '-'")
		return "", false
	}
	target, err := filepath.EvalSymlinks(host)
	if err == nil && s.root.mapped() && !s.root.within(target) {
		err = errOutside
	}
	if err != nil {
		unhandled(w, pyOSError(err, p.path))
		return "", false
	}
	return target, true
}

// scratchFile makes the temporary archive file: beside the directory, on
// the same volume and never inside it, when the parent is writable; else
// (and for the box's "/", which has no parent) in the temp directory.
func (s *Server) scratchFile(target, format string) (*os.File, error) {
	dir := ""
	if parent := filepath.Dir(target); s.root.box(target) != "/" && parent != target && writable(parent) {
		dir = parent
	} else {
		var err error
		if dir, err = pyTempDir(); err != nil {
			return nil, err
		}
	}
	return os.CreateTemp(dir, "tmp*"+archiveSuffix(format))
}

// archiveJob is one archive being built.
type archiveJob struct {
	root, boxRoot string // host and box paths of the narrowed root
	ceiling       string // where git stops looking upward ("" for none)
	params        archiveParams
	pure          bool // the pure-Go git stands in for the git binary
}

// name is the root's base name as the box sees it ("" for "/").
func (a archiveJob) name() string {
	if a.boxRoot == "/" {
		return ""
	}
	return path.Base(a.boxRoot)
}

func (a archiveJob) suffix() string { return archiveSuffix(a.params.format) }

func (a archiveJob) mediaType() string {
	if a.params.format == "tar.gz" {
		return "application/gzip"
	}
	return "text/x-patch"
}

func archiveSuffix(format string) string {
	if format == "tar.gz" {
		return ".tar.gz"
	}
	return ".patch"
}

// buildArchive writes the archive to tmp; for a git-delta it returns the
// base commit ("" for the empty tree).
func (s *Server) buildArchive(ctx context.Context, tmp *os.File, a archiveJob) (string, error) {
	p := a.params
	switch {
	case p.format == "tar.gz":
		t := &tarball{root: a.root, name: a.name(), excludes: p.excludes, log: s.log}
		return "", t.write(tmp)
	case a.pure:
		return gitDeltaPure(tmp, a.root, p.baseRef, p.excludes, a.ceiling)
	}
	return gitDelta(ctx, tmp, a.root, p.baseRef, p.excludes, a.ceiling)
}

// archiveError answers a failed build as upstream maps its exceptions.
func (s *Server) archiveError(w http.ResponseWriter, a archiveJob, err error) {
	var bad badRef
	var gitErr gitCommandError
	switch {
	case errors.Is(err, errNotRepo):
		httpError(w, http.StatusBadRequest, "Not a git repository: Not a git repository: "+a.boxRoot)
	case errors.As(err, &bad):
		httpError(w, http.StatusBadRequest, fmt.Sprintf("base_ref %s could not be resolved", pyRepr(bad.ref)))
	case errors.As(err, &gitErr):
		s.log.Warn("git-delta failed", "root", a.root, "err", gitErr.detail)
		httpError(w, http.StatusInternalServerError, "Failed to generate git delta: "+gitErr.message)
	default:
		s.log.Warn("archive failed", "root", a.root, "err", err)
		httpError(w, http.StatusInternalServerError, "Failed to archive directory: "+err.Error())
	}
}

// headers are the X-Archive-* headers: the repository's when the root
// holds a .git (percent-encoded), the base's for a git-delta with one.
func (a archiveJob) headers(ctx context.Context, base string) http.Header {
	h := http.Header{}
	if exists(filepath.Join(a.root, ".git")) {
		meta := repoMetadata(ctx, a.root, a.pure, a.ceiling)
		for _, kv := range [][2]string{{"repo_remote", "X-Archive-Repo-Remote"}, {"branch", "X-Archive-Branch"},
			{"head_commit", "X-Archive-Head-Commit"}} {
			if v := meta[kv[0]]; v != "" {
				h.Set(kv[1], pyQuote(v, ""))
			}
		}
		h.Set("X-Archive-Repo-Root", pyQuote(a.boxRoot, ""))
	}
	if base != "" {
		h.Set("X-Archive-Base-Commit", base)
		ref := "auto"
		if p := a.params.baseRef; p != nil && *p != "" {
			ref = *p
		}
		h.Set("X-Archive-Base-Ref", ref)
	}
	return h
}

type archiveParams struct {
	path, format string
	baseRef      *string // nil: auto
	excludes     []string
}

// archiveQuery reads the query as FastAPI validates it: every problem is
// reported at once, in parameter order; a repeated parameter takes its
// last value.
func archiveQuery(w http.ResponseWriter, r *http.Request) (archiveParams, bool) {
	q := r.URL.Query()
	var errs validationErrors
	p := archiveParams{format: "git-delta"}
	if v, ok := lastQuery(q, "path"); ok {
		p.path = v
	} else {
		errs.add("missing", []any{"query", "path"}, "Field required", nil, nil)
	}
	if v, ok := lastQuery(q, "format"); ok {
		p.format = v
		if v != "git-delta" && v != "tar.gz" {
			errs.add("literal_error", []any{"query", "format"}, "Input should be 'git-delta' or 'tar.gz'", v,
				map[string]any{"expected": "'git-delta' or 'tar.gz'"})
		}
	}
	if v, ok := lastQuery(q, "base_ref"); ok {
		p.baseRef = &v
	}
	useDefault := true
	if v, ok := lastQuery(q, "use_default_excludes"); ok {
		b, valid := pyBool(v)
		if !valid {
			errs.add("bool_parsing", []any{"query", "use_default_excludes"},
				"Input should be a valid boolean, unable to interpret input", v, nil)
		}
		useDefault = b
	}
	if errs.write(w) {
		return p, false
	}
	p.excludes = []string{}
	if useDefault {
		p.excludes = append(p.excludes, defaultExcludes...)
	}
	p.excludes = append(p.excludes, q["exclude"]...)
	return p, true
}

// lastQuery is a query parameter as Starlette reads a single value: the
// last one given.
func lastQuery(q url.Values, key string) (string, bool) {
	vs, ok := q[key]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// resendAll applies a socket's deprecated resend_all (a bool): true means
// resend_mode "all" when resend_mode is absent. It returns the mode and
// whether resend_all, if given, is a valid bool.
func resendAll(q url.Values, mode string, hasMode bool) (string, bool) {
	v, ok := lastQuery(q, "resend_all")
	if !ok {
		return mode, true
	}
	all, valid := pyBool(v)
	if all && !hasMode {
		mode = "all"
	}
	return mode, valid
}

// pyBool parses a query boolean as pydantic does.
func pyBool(v string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "t", "yes", "y", "on":
		return true, true
	case "0", "false", "f", "no", "n", "off":
		return false, true
	}
	return false, false
}

// repoRoot narrows the directory to archive as upstream's
// _resolve_git_repo_root: dir itself when dir/.git exists (a file counts,
// as in a worktree or submodule); else the single directory found 1, 2 or
// 3 levels below dir whose .git exists, searching depth first without
// entering hidden directories, node_modules, venv, site-packages, vendor,
// symlinks, or a repository once found; else (none, or two or more) dir.
func repoRoot(dir string) string {
	if exists(filepath.Join(dir, ".git")) {
		return dir
	}
	skip := map[string]bool{"node_modules": true, "venv": true, "site-packages": true, "vendor": true}
	var found []string
	type frame struct {
		dir   string
		depth int
	}
	stack := []frame{{dir, 0}}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if cur.depth >= 3 {
			continue
		}
		entries, err := os.ReadDir(cur.dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") || skip[e.Name()] || !e.IsDir() {
				continue // e.IsDir is false for a symlink, as is_symlink() skips it
			}
			child := filepath.Join(cur.dir, e.Name())
			if exists(filepath.Join(child, ".git")) {
				if found = append(found, child); len(found) > 1 {
					return dir // ambiguous: do not guess
				}
				continue
			}
			stack = append(stack, frame{child, cur.depth + 1})
		}
	}
	if len(found) == 1 {
		return found[0]
	}
	return dir
}

// exists is Path.exists(): the path resolves (symlinks followed).
func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// missing says whether err means the path is not there, as Path.exists()
// takes it (and a path leading out of the root).
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errOutside) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, syscall.ELOOP)
}

// haveGit reports whether a git binary is on PATH.
func haveGit() bool {
	_, err := exec.LookPath("git")
	return err == nil
}

// validationErrors collects FastAPI's 422 items.
type validationErrors []map[string]any

func (v *validationErrors) add(typ string, loc []any, msg string, input any, ctx map[string]any) {
	item := map[string]any{"type": typ, "loc": loc, "msg": msg, "input": input}
	if ctx != nil {
		item["ctx"] = ctx
	}
	*v = append(*v, item)
}

// write answers 422 when there is anything to report.
func (v validationErrors) write(w http.ResponseWriter) bool {
	if len(v) == 0 {
		return false
	}
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []map[string]any(v)})
	return true
}
