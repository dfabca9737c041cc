// Package exports writes verified exports: per workspace and time, one
// directory under an export root holding the files captured from a box
// (trajectory zips, archives) and a manifest.json describing them.
//
// Guarantees:
//   - Nothing is held whole in memory: each file is streamed to a temp file
//     in the export's staging directory and hashed (SHA-256) while it
//     streams; it is fsynced, renamed to its name and the directory fsynced.
//   - Each file is read back through a second descriptor and hashed again:
//     every fsynced stretch while the rest still streams, so a large
//     archive costs about one pass. A file whose read-back differs is an
//     error. Commit then writes the manifest with "verified": true (itself
//     fsynced, renamed and read back), and only then renames the staging
//     directory to its final name and fsyncs the workspace directory.
//   - So a directory <root>/<workspace>/<stamp>/ exists only with a verified
//     manifest. Any failure (a full disk, an unwritable root, a read-back
//     mismatch, a source that fails mid-stream) returns an error naming the
//     file and the cause, and removes the staging directory: there is never
//     a partial success.
//
// The read-back goes through the operating system, so it proves that what
// the filesystem returns equals what was streamed, not that the medium
// holds it (a page-cache hit can answer).
package exports

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ManifestName is the manifest's file name inside an export directory.
const ManifestName = "manifest.json"

// ManifestVersion is the manifest's format version.
const ManifestVersion = 1

// copyBuf is the size of the one buffer each copy uses: large enough that
// syscalls do not dominate, small enough to keep memory flat.
const copyBuf = 1 << 20

// ErrNoSpace matches (errors.Is) a write that failed because the export
// location is full (ENOSPC or EDQUOT).
var ErrNoSpace = errors.New("export location is full")

// ErrUnwritable matches a location that cannot be created or written
// (permissions, read-only filesystem, a file where a directory should be).
var ErrUnwritable = errors.New("export location is not writable")

// ErrMissing matches an export root that does not exist. The root is never
// created here: a configured location that is gone (an unmounted disk)
// must block, not silently fill the disk underneath.
var ErrMissing = errors.New("export location does not exist")

// ErrMismatch matches a read-back whose SHA-256 differs from the one taken
// while streaming.
var ErrMismatch = errors.New("export read-back does not match")

// Kinds of exported file.
const (
	KindTrajectory = "trajectory"
	KindArchive    = "archive"
)

// File describes one exported file in the manifest.
type File struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// ConversationID is set for a trajectory.
	ConversationID string `json:"conversation_id,omitempty"`
	// Format is set for an archive ("tar.gz" or "git-delta").
	Format string `json:"format,omitempty"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// Root is, for the tar.gz archive, the box directory its top
	// directory stands for; Entries and ContentBytes count the regular
	// files it holds and their bytes (see package wsarchive).
	Root         string `json:"root,omitempty"`
	Entries      int64  `json:"entries,omitempty"`
	ContentBytes int64  `json:"content_bytes,omitempty"`
	// Base is, for the git-delta, what the patch applies to: "commit"
	// (BaseCommit, resolved from BaseRef) or "empty tree" (a repository
	// with no base: apply it to an empty repository).
	Base string `json:"base,omitempty"`
	// Repository facts the archive's headers carried.
	BaseCommit string `json:"base_commit,omitempty"`
	BaseRef    string `json:"base_ref,omitempty"`
	HeadCommit string `json:"head_commit,omitempty"`
	Branch     string `json:"branch,omitempty"`
	Remote     string `json:"remote,omitempty"`
	RepoRoot   string `json:"repo_root,omitempty"`
}

// Manifest is manifest.json.
type Manifest struct {
	Version         int       `json:"version"`
	ID              string    `json:"id"`
	WorkspaceID     string    `json:"workspace_id"`
	BoxID           string    `json:"box_id"`
	CreatedAt       time.Time `json:"created_at"`
	ConversationIDs []string  `json:"conversation_ids"`
	Files           []File    `json:"files"`
	// BaseCommit, Branch and Remote repeat the archive's repository facts
	// (the first archive that carried each), for a reader of the manifest
	// alone.
	BaseCommit string `json:"base_commit,omitempty"`
	Branch     string `json:"branch,omitempty"`
	Remote     string `json:"remote,omitempty"`
	// Workspace says how the workspace archive was captured.
	Workspace *Capture `json:"workspace,omitempty"`
	// Notes say what the export could not do that did not fail it (a
	// git-delta the agent-server could not make, say).
	Notes      []string  `json:"notes,omitempty"`
	Verified   bool      `json:"verified"`
	VerifiedAt time.Time `json:"verified_at"`
	// Bytes is the sum of the files' sizes.
	Bytes int64 `json:"bytes"`
}

// Capture says how an export's workspace archive was made.
type Capture struct {
	// Path is the box directory archived.
	Path string `json:"path"`
	// NarrowedTo is the repository the agent-server narrowed its archive
	// of Path to; companion then captured the rest of Path itself (Parts)
	// and re-packed everything into one archive rooted at Path.
	NarrowedTo string `json:"narrowed_to,omitempty"`
	// Parts are the requests the archive was made of, in order.
	Parts []Part `json:"parts"`
	// Skipped are entries seen and not captured (symbolic links, special
	// files, entries gone before they were read), with why.
	Skipped []Skipped `json:"skipped,omitempty"`
	// Excluded names what the agent-server never puts in an archive.
	Excluded []string `json:"excluded"`
}

// Part is one request that captured part of the workspace.
type Part struct {
	Path string `json:"path"`
	// Via is "archive" (GET /api/file/archive) or "download" (GET
	// /api/file/download, a single file).
	Via string `json:"via"`
	// RepoRoot is the repository the agent-server narrowed an archive to.
	RepoRoot string `json:"repo_root,omitempty"`
}

// Skipped is an entry of the workspace an export does not hold.
type Skipped struct {
	Path string `json:"path"`
	Type string `json:"type"`
	Why  string `json:"why"`
}

// Writer creates exports under Root, which must exist (see ErrMissing).
// Now defaults to time.Now.
type Writer struct {
	Root string
	Now  func() time.Time
	// MarkerRecord is a file outside Root (in the data dir) that
	// remembers the marker written in Root at first use, so that a root
	// that lost it (a disk not mounted) is refused (marker.go). Empty:
	// only /etc/fstab is checked.
	MarkerRecord string

	markerMu         sync.Mutex
	fstab, mountinfo string // test hooks for checkFstab

	// wrapFile and openRead are fault-injection hooks for tests.
	wrapFile func(io.Writer) io.Writer
	openRead func(string) (io.ReadCloser, error)
}

// Export is one export being written; finish it with Commit or Abort.
type Export struct {
	w       *Writer
	m       Manifest
	wsDir   string
	staging string
	final   string
	done    bool
	names   map[string]bool
}

// safeName is compiled on first use: its bounded repeat makes compiling
// it cost most of a millisecond, which start-up should not pay.
var safeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`) })

// Begin creates the staging directory for an export of workspace (on box)
// at the writer's current time.
func (w *Writer) Begin(workspaceID, boxID string) (*Export, error) {
	return w.BeginRecord(workspaceID, boxID, "")
}

// BeginRecord is Begin for the export whose record (in the store) is
// record: the staging directory's name carries it
// (.<stamp>-<rand>.<record>.partial), so a sweep can tell from the record
// whether anyone may still be writing there (Partials). The record must be
// written, running, before this is called.
func (w *Writer) BeginRecord(workspaceID, boxID, record string) (*Export, error) {
	if w.Root == "" {
		return nil, errors.New("export: no export root set")
	}
	if !safeName().MatchString(workspaceID) {
		return nil, fmt.Errorf("export: workspace id %q is not a safe directory name", workspaceID)
	}
	if record != "" && (!safeName().MatchString(record) || strings.Contains(record, ".")) {
		return nil, fmt.Errorf("export: record id %q is not a safe directory name part", record)
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	t := now().UTC()
	var rnd [4]byte
	rand.Read(rnd[:])
	id := t.Format("20060102T150405Z") + "-" + hex.EncodeToString(rnd[:])
	fi, err := os.Stat(w.Root)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, classified{fmt.Errorf("export: root %s: %w", w.Root, err), ErrMissing}
	case err != nil:
		return nil, classify(fmt.Errorf("export: root %s: %w", w.Root, err))
	case !fi.IsDir():
		return nil, classified{fmt.Errorf("export: root %s is not a directory", w.Root), ErrUnwritable}
	}
	if err := w.checkRoot(); err != nil {
		return nil, err
	}
	wsDir := filepath.Join(w.Root, workspaceID)
	if err := os.MkdirAll(wsDir, 0o700); err != nil {
		return nil, classify(fmt.Errorf("export: create %s: %w", wsDir, err))
	}
	stem := id
	if record != "" {
		stem += "." + record
	}
	staging := filepath.Join(wsDir, "."+stem+".partial")
	if err := os.Mkdir(staging, 0o700); err != nil {
		return nil, classify(fmt.Errorf("export: create %s: %w", staging, err))
	}
	return &Export{
		w: w, wsDir: wsDir, staging: staging, final: filepath.Join(wsDir, id), names: map[string]bool{},
		m: Manifest{Version: ManifestVersion, ID: id, WorkspaceID: workspaceID, BoxID: boxID, CreatedAt: t,
			ConversationIDs: []string{}, Files: []File{}},
	}, nil
}

// ID is the export's id (its directory name).
func (e *Export) ID() string { return e.m.ID }

// scratchPrefix names the scratch files of an export; Commit removes any
// left.
const scratchPrefix = ".scratch-"

// Scratch creates a temporary file in the export's staging directory,
// on the export's own disk, for data that must be written before it can
// be added (an index built while an archive streams). The caller removes
// it; Commit and Abort remove what is left.
func (e *Export) Scratch() (*os.File, error) {
	if e.done {
		return nil, errors.New("export: already finished")
	}
	f, err := os.CreateTemp(e.staging, scratchPrefix+"*")
	if err != nil {
		return nil, classify(fmt.Errorf("export: scratch file: %w", err))
	}
	return f, nil
}

// Note adds a note to the manifest.
func (e *Export) Note(s string) { e.m.Notes = append(e.m.Notes, s) }

// Describe sets how the workspace archive was captured, for the manifest.
func (e *Export) Describe(c Capture) { e.m.Workspace = &c }

// Annotate changes the description of an added file (not its name,
// bytes or hash), for facts learnt only once it was written.
func (e *Export) Annotate(name string, fn func(f *File)) {
	for i := range e.m.Files {
		if e.m.Files[i].Name == name {
			n, b, h := e.m.Files[i].Name, e.m.Files[i].Bytes, e.m.Files[i].SHA256
			fn(&e.m.Files[i])
			e.m.Files[i].Name, e.m.Files[i].Bytes, e.m.Files[i].SHA256 = n, b, h
		}
	}
}

// Add streams r into the export as f.Name, hashing it on the way, and
// records f (with Bytes and SHA256 filled in). On error the export is
// aborted.
func (e *Export) Add(f File, r io.Reader) (File, error) {
	if e.done {
		return f, errors.New("export: already finished")
	}
	if !safeName().MatchString(f.Name) || f.Name == ManifestName || e.names[f.Name] {
		e.Abort()
		return f, fmt.Errorf("export: file name %q is unsafe, reserved or used twice", f.Name)
	}
	n, sum, err := e.writeFile(f.Name, r)
	if err != nil {
		e.Abort()
		return f, err
	}
	e.names[f.Name] = true
	f.Bytes, f.SHA256 = n, sum
	e.m.Files = append(e.m.Files, f)
	e.m.Bytes += n
	if f.ConversationID != "" {
		e.m.ConversationIDs = append(e.m.ConversationIDs, f.ConversationID)
	}
	if e.m.BaseCommit == "" {
		e.m.BaseCommit = f.BaseCommit
	}
	if e.m.Branch == "" {
		e.m.Branch = f.Branch
	}
	if e.m.Remote == "" {
		e.m.Remote = f.Remote
	}
	return f, nil
}

// Commit checks that every file read back equal (see writeFile) still has
// its size, writes the verified manifest, and moves the export to its final directory. It returns the
// manifest and the export's directory. On error nothing is left behind.
func (e *Export) Commit() (Manifest, string, error) {
	if e.done {
		return Manifest{}, "", errors.New("export: already finished")
	}
	if scratch, _ := filepath.Glob(filepath.Join(e.staging, scratchPrefix+"*")); len(scratch) > 0 {
		for _, p := range scratch {
			os.Remove(p)
		}
	}
	// Each file was read back after it was made durable (writeFile); what
	// is left to check is that its name still holds those bytes.
	for _, f := range e.m.Files {
		fi, err := os.Stat(filepath.Join(e.staging, f.Name))
		if err == nil && fi.Size() != f.Bytes {
			err = fmt.Errorf("%w: size %d on disk, %d streamed", ErrMismatch, fi.Size(), f.Bytes)
		}
		if err != nil {
			e.Abort()
			return Manifest{}, "", fmt.Errorf("export %s: %w", f.Name, err)
		}
	}
	now := time.Now
	if e.w.Now != nil {
		now = e.w.Now
	}
	e.m.Verified, e.m.VerifiedAt = true, now().UTC()
	b, err := json.MarshalIndent(e.m, "", "  ")
	if err != nil {
		e.Abort()
		return Manifest{}, "", fmt.Errorf("export: encode manifest: %w", err)
	}
	b = append(b, '\n')
	if _, _, err := e.writeFile(ManifestName, strings.NewReader(string(b))); err != nil {
		e.Abort()
		return Manifest{}, "", err
	}
	if err := os.Rename(e.staging, e.final); err != nil {
		e.Abort()
		return Manifest{}, "", classify(fmt.Errorf("export: move into place: %w", err))
	}
	e.done = true
	if err := syncDir(e.wsDir); err != nil {
		os.RemoveAll(e.final)
		return Manifest{}, "", classify(fmt.Errorf("export: fsync %s: %w", e.wsDir, err))
	}
	return e.m, e.final, nil
}

// verify hashes the file on disk and compares it with what was streamed.
func (e *Export) verify(name string, size int64, sum string) error {
	p := filepath.Join(e.staging, name)
	open := func(p string) (io.ReadCloser, error) { return os.Open(p) }
	if e.w.openRead != nil {
		open = e.w.openRead
	}
	f, err := open(p)
	if err != nil {
		return classify(fmt.Errorf("export %s: read back: %w", name, err))
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, make([]byte, copyBuf))
	if err != nil {
		return fmt.Errorf("export %s: read back: %w", name, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if n != size || got != sum {
		return fmt.Errorf("export %s: %w: streamed %d bytes sha256 %s, read back %d bytes sha256 %s",
			name, ErrMismatch, size, sum, n, got)
	}
	return nil
}

// Abort removes the staging directory and everything in it.
func (e *Export) Abort() {
	if e.done {
		return
	}
	e.done = true
	os.RemoveAll(e.staging)
}

// syncDir makes a rename in dir durable. Windows cannot open a directory
// for syncing, and NTFS journals renames, so it is skipped there.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// classified is an error that also matches a sentinel.
type classified struct {
	err  error
	kind error
}

func (c classified) Error() string {
	return c.err.Error() + " (" + c.kind.Error() + ")"
}
func (c classified) Unwrap() []error { return []error{c.err, c.kind} }

// classify tags disk-full and unwritable-location errors so callers can
// tell them apart with errors.Is.
func classify(err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return classified{err, ErrNoSpace}
	case errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, syscall.EISDIR):
		return classified{err, ErrUnwritable}
	}
	return err
}

// RemovePartial deletes staging directories left by exports that never
// finished (a crash, a kill): they never held a verified manifest, so
// nothing refers to them. Call it at start-up, before any export begins,
// and only when no other process writes under Root (one server). It
// returns how many it removed and the bytes they held.
func (w *Writer) RemovePartial() (n int, freed int64, err error) {
	ps, err := w.Partials("")
	for _, p := range ps {
		b, rerr := p.Remove()
		freed += b
		if rerr != nil {
			return n, freed, rerr
		}
		n++
	}
	return n, freed, err
}

// Partial is the staging directory of an export not (yet) committed.
type Partial struct {
	WorkspaceID string
	// Record is the export record's id the directory was begun for
	// (BeginRecord); empty for one begun without a record (Begin, or an
	// older companion).
	Record string
	// Dir is the staging directory's path.
	Dir string
}

// Partials lists the staging directories under Root, of one workspace
// (its directory name) or, with workspaceID empty, of all. A directory
// that vanishes while it is read (committed or aborted meanwhile) is not
// an error.
func (w *Writer) Partials(workspaceID string) ([]Partial, error) {
	var wss []string
	if workspaceID != "" {
		if !safeName().MatchString(workspaceID) {
			return nil, fmt.Errorf("export: workspace id %q is not a safe directory name", workspaceID)
		}
		wss = []string{workspaceID}
	} else {
		ents, err := os.ReadDir(w.Root)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("export root %s: %w", w.Root, err)
		}
		for _, e := range ents {
			if e.IsDir() {
				wss = append(wss, e.Name())
			}
		}
	}
	var out []Partial
	for _, ws := range wss {
		dir := filepath.Join(w.Root, ws)
		ents, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("export root %s: %w", dir, err)
		}
		for _, e := range ents {
			name := e.Name()
			if !e.IsDir() || !strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".partial") {
				continue
			}
			stem := strings.TrimSuffix(strings.TrimPrefix(name, "."), ".partial")
			_, record, _ := strings.Cut(stem, ".")
			out = append(out, Partial{WorkspaceID: ws, Record: record, Dir: filepath.Join(dir, name)})
		}
	}
	return out, nil
}

// Remove deletes the staging directory and returns the bytes its files
// held. A directory already gone (committed, which renamed it, or
// aborted) is no error and counts 0: Remove acts on the staging path only,
// never on an export's final directory.
func (p Partial) Remove() (int64, error) {
	n := filesBytes(p.Dir)
	if err := os.RemoveAll(p.Dir); err != nil {
		return n, fmt.Errorf("remove unfinished export %s: %w", p.Dir, err)
	}
	return n, nil
}

// filesBytes sums the sizes of the files under dir (what removing it
// frees), skipping what cannot be read.
func filesBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, ierr := d.Info(); ierr == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
