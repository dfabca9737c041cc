package main

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// The agent-server's file routes besides the archive (file_router.py):
// download, upload and create_directory move the idle clock;
// search_subdirs and home do not. Every path is absolute and, under
// EMULATOR_FS_ROOT, a box path.

// boxStat answers 400 for a relative path (ok false); else it maps p to
// the host and stats it, for the caller to answer err its own way.
func (s *Server) boxStat(w http.ResponseWriter, p string) (host string, fi fs.FileInfo, ok bool, err error) {
	if !path.IsAbs(p) {
		httpError(w, http.StatusBadRequest, "Path must be absolute")
		return "", nil, false, nil
	}
	host, err = s.root.host(p)
	if err == nil {
		fi, err = os.Stat(host)
	}
	return host, fi, true, err
}

// download is GET /api/file/download?path=: the file as an attachment
// (see fileResponse), symlinks followed.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	p, ok := requiredPath(w, r)
	if !ok {
		return
	}
	s.touch()
	host, fi, ok, err := s.boxStat(w, p)
	if !ok {
		return
	}
	switch {
	case err != nil && missing(err):
		httpError(w, http.StatusNotFound, "File not found")
		return
	case err != nil:
		httpError(w, http.StatusInternalServerError, "Failed to download file: "+pyOSError(err, pyPathStr(p)))
		return
	case !fi.Mode().IsRegular():
		httpError(w, http.StatusBadRequest, "Path is not a file")
		return
	}
	f, err := os.Open(host)
	if err != nil {
		// Upstream opens the file only once the 200 has started: the
		// answer breaks off.
		s.log.Warn("download: cannot open", "path", p, "err", err)
		panic(http.ErrAbortHandler)
	}
	defer f.Close()
	fileResponse(w, r, f, "application/octet-stream", pyName(p), nil)
}

// upload is POST /api/file/upload?path= with a multipart/form-data body
// whose "file" part is written to path, parents created. As with
// Starlette, the whole body is read (spooled: memory up to 1 MiB, then a
// temporary file) before the route runs, so a missing part is a 422 and a
// malformed body a 400 that leave the target untouched; the copy to the
// target then happens as upstream's does.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	var errs validationErrors
	p, hasPath := lastQuery(r.URL.Query(), "path")
	if !hasPath {
		errs.add("missing", []any{"query", "path"}, "Field required", nil, nil)
	}
	form, err := readForm(r)
	if err != nil {
		s.log.Info("upload: unreadable body", "err", err)
		httpError(w, http.StatusBadRequest, "There was an error parsing the body")
		return
	}
	defer form.close()
	switch {
	case form.file != nil:
	case form.text != nil && *form.text != "":
		msg := "Expected UploadFile, received: <class 'str'>"
		errs.add("value_error", []any{"body", "file"}, "Value error, "+msg, *form.text, map[string]any{"error": msg})
	default:
		errs.add("missing", []any{"body", "file"}, "Field required", nil, nil)
	}
	if errs.write(w) {
		return
	}
	s.touch()
	if !path.IsAbs(p) {
		httpError(w, http.StatusBadRequest, "Path must be absolute")
		return
	}
	target := pyPathStr(p)
	fail := func(err error, at string) {
		httpError(w, http.StatusInternalServerError, "Failed to upload file: "+pyOSError(err, at))
	}
	if err := s.mkdirAll(pyParent(target)); err != nil {
		at := pyParent(target)
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			at = pe.Path
		}
		fail(err, at)
		return
	}
	host, err := s.root.host(target)
	if err != nil {
		fail(syscall.ENOENT, target)
		return
	}
	f, err := os.OpenFile(host, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		fail(err, target)
		return
	}
	_, err = form.file.copyTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fail(err, target)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}

// createDirectory is POST /api/file/create_directory?path=: mkdir -p, and
// idempotent; something else in the way is a 400.
func (s *Server) createDirectory(w http.ResponseWriter, r *http.Request) {
	p, ok := requiredPath(w, r)
	if !ok {
		return
	}
	s.touch()
	if !path.IsAbs(p) {
		httpError(w, http.StatusBadRequest, "Path must be absolute")
		return
	}
	err := s.mkdirAll(pyPathStr(p))
	var pe *fs.PathError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	case errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.ENOTDIR):
		httpError(w, http.StatusBadRequest, "Path exists and is not a directory")
	case errors.As(err, &pe) && (errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)):
		httpError(w, http.StatusForbidden, "Permission denied: "+pyOSError(err, pe.Path))
	case errors.As(err, &pe):
		httpError(w, http.StatusInternalServerError, "Failed to create directory: "+pyOSError(err, pe.Path))
	default:
		httpError(w, http.StatusInternalServerError, "Failed to create directory: "+err.Error())
	}
}

// mkdirAll is Path(box).mkdir(parents=True, exist_ok=True), step for step
// (so a failure names the path Python's would), on the host path of each
// step. Errors are *fs.PathError with the box path.
func (s *Server) mkdirAll(box string) error {
	mkdir := func(b string) error {
		h, err := s.root.host(pyParent(b))
		if err != nil {
			return &fs.PathError{Op: "mkdir", Path: b, Err: syscall.ENOENT}
		}
		if err := os.Mkdir(filepath.Join(h, path.Base(b)), 0o777); err != nil {
			return &fs.PathError{Op: "mkdir", Path: b, Err: errors.Unwrap(err)}
		}
		return nil
	}
	isDir := func(b string) bool {
		h, err := s.root.host(b)
		if err != nil {
			return false
		}
		fi, err := os.Stat(h)
		return err == nil && fi.IsDir()
	}
	err := mkdir(box)
	if errors.Is(err, syscall.ENOENT) {
		parent := pyParent(box)
		if parent == box {
			return err
		}
		if err := s.mkdirAll(parent); err != nil {
			return err
		}
		err = mkdir(box)
	}
	if err != nil && isDir(box) {
		return nil
	}
	return err
}

type subdirEntry struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// searchSubdirs is GET /api/file/search_subdirs: the directories (not
// symlinks, not files; hidden ones only with include_hidden) right below
// path, sorted by lower-cased name, paged: next_page_id is the lower-cased
// name of the next page's first item, and page_id starts a page there
// (from the first item when it matches none). It does not move the idle
// clock. Note that no route lists a directory's files.
func (s *Server) searchSubdirs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var errs validationErrors
	p, hasPath := lastQuery(q, "path")
	if !hasPath {
		errs.add("missing", []any{"query", "path"}, "Field required", nil, nil)
	}
	pageID, _ := lastQuery(q, "page_id")
	limit := int64(100)
	if v, ok := lastQuery(q, "limit"); ok {
		n, valid := pydanticInt(v)
		switch {
		case !valid:
			errs.add("int_parsing", []any{"query", "limit"}, "Input should be a valid integer, unable to parse string as an integer", v, nil)
		case n <= 0:
			errs.add("greater_than", []any{"query", "limit"}, "Input should be greater than 0", v, map[string]any{"gt": 0})
		}
		limit = n
	}
	hidden := boolQuery(q, "include_hidden", &errs)
	if errs.write(w) {
		return
	}
	if limit > 100 {
		// Upstream declares the bound with a keyword FastAPI does not
		// enforce ("lte"); the route's own assert then fails: a bare 500.
		unhandled(w, "")
		return
	}
	host, fi, ok, err := s.boxStat(w, p)
	if !ok {
		return
	}
	switch {
	case err != nil && missing(err):
		httpError(w, http.StatusNotFound, "Directory not found")
		return
	case err != nil:
		unhandled(w, pyOSError(err, pyPathStr(p)))
		return
	case !fi.IsDir():
		httpError(w, http.StatusBadRequest, "Path is not a directory")
		return
	}
	entries, err := subdirs(host, p, hidden)
	if err != nil {
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
			httpError(w, http.StatusForbidden, "Permission denied: "+pyOSError(err, pyPathStr(p)))
		} else {
			unhandled(w, pyOSError(err, pyPathStr(p)))
		}
		return
	}
	start := 0
	if pageID != "" {
		for i, e := range entries {
			if pyLower(e.Name) == pageID {
				start = i
				break
			}
		}
	}
	end := min(start+int(limit), len(entries))
	page := struct {
		Items      []subdirEntry `json:"items"`
		NextPageID *string       `json:"next_page_id"`
	}{Items: entries[start:end]}
	if end < len(entries) {
		next := pyLower(entries[end].Name)
		page.NextPageID = &next
	}
	writeJSON(w, http.StatusOK, page)
}

// subdirs lists the directories right below host (not symlinks), hidden
// ones only when asked, sorted by lower-cased name (a stable sort of the
// directory's own order, as Python's list.sort). Paths are written under
// the box path dir as given.
func subdirs(host, dir string, hidden bool) ([]subdirEntry, error) {
	d, err := os.Open(host)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := []subdirEntry{}
	for _, e := range ents {
		if !hidden && strings.HasPrefix(e.Name(), ".") || !e.IsDir() {
			continue
		}
		out = append(out, subdirEntry{Name: e.Name(), Path: pyJoin(dir, e.Name())})
	}
	sort.SliceStable(out, func(i, j int) bool { return pyLower(out[i].Name) < pyLower(out[j].Name) })
	return out, nil
}

type browserEntry struct {
	Label string `json:"label"`
	Path  string `json:"path"`
}

// home is GET /api/file/home: the server user's home directory (HOME, else
// the user database), the first 50 directories in it as favorites (the
// rules of searchSubdirs), and "/" as the only location. Not activity.
func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	var errs validationErrors
	hidden := boolQuery(r.URL.Query(), "include_hidden", &errs)
	if errs.write(w) {
		return
	}
	home := os.Getenv("HOME")
	if home == "" {
		u, err := user.Current()
		if err != nil || u.HomeDir == "" {
			unhandled(w, "Could not determine home directory.")
			return
		}
		home = s.root.box(u.HomeDir)
	}
	home = pyPathStr(home)
	favorites := []browserEntry{}
	host, err := s.root.host(home)
	if err != nil {
		err = syscall.ENOENT
	}
	var entries []subdirEntry
	if err == nil {
		entries, err = subdirs(host, home, hidden)
	}
	switch {
	case err == nil:
		for _, e := range entries[:min(50, len(entries))] {
			favorites = append(favorites, browserEntry{Label: e.Name, Path: e.Path})
		}
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
	default:
		unhandled(w, pyOSError(err, home))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"home": home, "favorites": favorites,
		"locations": []browserEntry{{Label: "/", Path: "/"}}})
}

// requiredPath reads the path query parameter (422 when absent).
func requiredPath(w http.ResponseWriter, r *http.Request) (string, bool) {
	p, ok := lastQuery(r.URL.Query(), "path")
	if !ok {
		var errs validationErrors
		errs.add("missing", []any{"query", "path"}, "Field required", nil, nil)
		errs.write(w)
	}
	return p, ok
}

// boolQuery reads an optional boolean query parameter (default false).
func boolQuery(q map[string][]string, key string, errs *validationErrors) bool {
	v, ok := lastQuery(q, key)
	if !ok {
		return false
	}
	b, valid := pyBool(v)
	if !valid {
		errs.add("bool_parsing", []any{"query", key}, "Input should be a valid boolean, unable to interpret input", v, nil)
	}
	return b
}

// pydanticInt parses an integer query value as pydantic does: spaces
// around, a sign, underscores between digits, a zero fraction.
func pydanticInt(v string) (int64, bool) {
	s := strings.TrimSpace(v)
	if whole, frac, ok := strings.Cut(s, "."); ok && frac != "" && strings.Trim(frac, "0") == "" {
		s = whole
	}
	return pyInt(s)
}
