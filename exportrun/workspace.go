package exportrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/exports"
	"github.com/canvasapp/companion/wsarchive"
)

// The workspace archive.
//
// GET /api/file/archive narrows its archive to the one repository it
// finds up to three levels below the path asked for (upstream's repo-root
// resolution: docs/agent-server-files.md), so the archive of /workspace
// holding /workspace/repo and /workspace/notes.txt holds repo/ only. The
// archive's X-Archive-Repo-Root header names the repository; when it is
// below the path asked for, the archive was narrowed, and the rest of the
// path is captured here: the entries of every directory between the path
// and the repository are listed (list), each other directory is archived
// in turn (narrowed again, it is handled the same way), each regular file
// is downloaded, and everything is re-packed into one archive rooted at
// the path, as the agent-server would have made it without narrowing.
// What cannot be captured (symbolic links, special files) is named in
// the manifest; what cannot be listed fails the export, naming what
// would be lost.

// workspace is the workspace archive of one export being captured.
type workspace struct {
	cl      *agentclient.Client
	capture exports.Capture
	// b is the re-pack, when the archive was narrowed.
	b *wsarchive.Builder
}

// archived is what captureWorkspace added to the export.
type archived struct {
	nothing bool // the agent-server had nothing to archive (400)
}

// captureWorkspace adds the archive of root (and its index) to e.
func (x *Exporter) captureWorkspace(ctx context.Context, cl *agentclient.Client, e *exports.Export, root string, c *counter) (archived, error) {
	c.step = "archive tar.gz"
	a, err := cl.Archive(ctx, agentclient.ArchiveRequest{Path: root, Format: agentclient.FormatTarGz})
	if errors.Is(err, agentclient.ErrNothingToArchive) {
		return archived{nothing: true}, nil
	}
	if err != nil {
		return archived{}, fmt.Errorf("export: tar.gz archive of %s: %w", root, err)
	}
	defer a.Body.Close()
	idx, err := e.Scratch()
	if err != nil {
		return archived{}, err
	}
	defer func() { idx.Close(); os.Remove(idx.Name()) }()
	w := &workspace{cl: cl, capture: exports.Capture{Path: root, Excluded: core.NeverArchived()}}
	file := exports.File{Name: ArchiveName, Kind: exports.KindArchive, Format: agentclient.FormatTarGz, Root: root,
		HeadCommit: a.Meta.HeadCommit, Branch: a.Meta.Branch, Remote: a.Meta.RepoRemote, RepoRoot: a.Meta.RepoRoot}
	var files, bytes int64
	narrowed, err := narrowedBelow(root, a.Meta.RepoRoot)
	if err != nil {
		return archived{}, err
	}
	if narrowed == "" {
		w.capture.Parts = []exports.Part{{Path: root, Via: "archive", RepoRoot: a.Meta.RepoRoot}}
		files, bytes, err = addAsIs(e, file, c.wrap(a.Body), idx)
	} else {
		w.capture.NarrowedTo = a.Meta.RepoRoot
		files, bytes, err = w.addRepacked(ctx, e, file, a, c, idx)
	}
	if err != nil {
		return archived{}, err
	}
	e.Annotate(ArchiveName, func(f *exports.File) { f.Entries, f.ContentBytes = files, bytes })
	e.Describe(w.capture)
	if _, err := idx.Seek(0, io.SeekStart); err != nil {
		return archived{}, fmt.Errorf("export: index: %w", err)
	}
	c.step = "index"
	if _, err := e.Add(exports.File{Name: IndexName, Kind: KindIndex, Format: "jsonl"}, c.wrap(idx)); err != nil {
		return archived{}, err
	}
	return archived{}, nil
}

// narrowedBelow returns the repository the archive of root was narrowed
// to ("" when it was not: no repository, or root itself). A repository
// that is not below root is an error: companion cannot tell what such an
// archive left out.
func narrowedBelow(root, repo string) (string, error) {
	if repo == "" || path.Clean(repo) == path.Clean(root) {
		return "", nil
	}
	rel, ok := below(root, repo)
	if !ok {
		return "", fmt.Errorf("export: the agent-server archived %s when asked for %s, which is not below it: companion cannot tell what that archive leaves out", repo, root)
	}
	return rel, nil
}

// below returns p relative to dir when p is strictly below it.
func below(dir, p string) (string, bool) {
	dir, p = path.Clean(dir), path.Clean(p)
	rel, ok := strings.CutPrefix(p, strings.TrimSuffix(dir, "/")+"/")
	return rel, ok && rel != "" && path.IsAbs(dir) && !strings.HasPrefix(rel, "../")
}

// addAsIs adds the agent-server's archive as it came, reading it on the
// way (through a pipe, so nothing waits for the whole of it) to write
// the index and to check it against its own manifest.
func addAsIs(e *exports.Export, f exports.File, body io.Reader, idx io.Writer) (files, bytes int64, err error) {
	pr, pw := io.Pipe()
	type result struct {
		sum wsarchive.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := wsarchive.Read(pr, indexTo(idx))
		// Whatever happened, take the rest of the stream, so the export
		// side never blocks on the pipe.
		io.Copy(io.Discard, pr)
		done <- result{sum, err}
	}()
	_, aerr := e.Add(f, io.TeeReader(body, pw))
	pw.Close()
	r := <-done
	if aerr != nil {
		return 0, 0, aerr
	}
	if r.err != nil {
		return 0, 0, fmt.Errorf("export: the agent-server's archive does not read back as an archive: %w", r.err)
	}
	return r.sum.Files, r.sum.Bytes, nil
}

// indexTo writes each member's index line to idx.
func indexTo(idx io.Writer) func(wsarchive.Member) error {
	enc := newIndexEncoder(idx)
	return func(m wsarchive.Member) error {
		if m.Rel == "" {
			return nil
		}
		ent, body := wsarchive.IndexEntry(m)
		if _, err := io.Copy(io.Discard, body); err != nil {
			return err
		}
		return enc.Encode(ent)
	}
}

// addRepacked adds the re-pack of a narrowed archive: a's members, then
// the rest of the capture's path, as one archive rooted at it.
func (w *workspace) addRepacked(ctx context.Context, e *exports.Export, f exports.File, a agentclient.ArchiveDownload, c *counter, idx io.Writer) (files, bytes int64, err error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := w.repack(ctx, pw, a, idx)
		pw.CloseWithError(err)
		done <- err
	}()
	_, aerr := e.Add(f, c.wrap(pr))
	pr.CloseWithError(errors.New("export: stopped reading the re-pack"))
	perr := <-done
	if perr != nil {
		return 0, 0, perr
	}
	if aerr != nil {
		return 0, 0, aerr
	}
	return w.b.Files, w.b.Bytes, nil
}

// repack writes the archive of the capture's path to out.
func (w *workspace) repack(ctx context.Context, out io.Writer, a agentclient.ArchiveDownload, idx io.Writer) error {
	root := w.capture.Path
	b, err := wsarchive.NewBuilder(out, path.Base(root), idx)
	if err != nil {
		return err
	}
	w.b = b
	if err := w.narrowed(ctx, root, "", a); err != nil {
		return err
	}
	return b.Close(nil)
}

// narrowed captures dir (at "at" in the re-pack) whose archive a was
// narrowed to a repository below it: a's members, then every other entry
// of each directory between dir and that repository.
func (w *workspace) narrowed(ctx context.Context, dir, at string, a agentclient.ArchiveDownload) error {
	rel, _ := below(dir, a.Meta.RepoRoot)
	w.capture.Parts = append(w.capture.Parts, exports.Part{Path: dir, Via: "archive", RepoRoot: a.Meta.RepoRoot})
	if at != "" {
		// The directory itself; its mode is not known (no route tells).
		if err := w.b.Dir(at, 0o755, time.Time{}); err != nil {
			return err
		}
	}
	spine := strings.Split(rel, "/")
	for i := 1; i < len(spine); i++ {
		if err := w.b.Dir(path.Join(at, strings.Join(spine[:i], "/")), 0o755, time.Time{}); err != nil {
			return err
		}
	}
	if err := w.copyArchive(path.Join(at, rel), a.Body); err != nil {
		return fmt.Errorf("export: archive of %s: %w", dir, err)
	}
	for i := range spine {
		level := strings.Join(spine[:i], "/")
		if err := w.level(ctx, path.Join(dir, level), path.Join(at, level), spine[i], a.Meta.RepoRoot); err != nil {
			return err
		}
	}
	return nil
}

// level captures the entries of dir (at "at") but its child skip, which
// leads to the repository the archive was narrowed to.
func (w *workspace) level(ctx context.Context, dir, at, skip, repo string) error {
	ents, err := list(ctx, w.cl, dir)
	if err != nil {
		return w.unlisted(ctx, dir, skip, repo, err)
	}
	for _, ent := range ents {
		if ent.name == skip {
			continue
		}
		p, rel := path.Join(dir, ent.name), path.Join(at, ent.name)
		switch ent.typ {
		case 'd':
			err = w.subdir(ctx, p, rel)
		case 'f', 'x':
			err = w.download(ctx, p, rel, ent.typ == 'x')
		case 'l':
			w.skip(p, "symlink", "the agent-server does not archive symbolic links")
		default:
			w.skip(p, "special", "the agent-server archives directories and regular files only")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// subdir captures the directory p (at rel).
func (w *workspace) subdir(ctx context.Context, p, rel string) error {
	a, err := w.cl.Archive(ctx, agentclient.ArchiveRequest{Path: p, Format: agentclient.FormatTarGz})
	if gone(err) {
		w.skip(p, "dir", "it was gone before it could be archived")
		return nil
	}
	if err != nil {
		return fmt.Errorf("export: tar.gz archive of %s: %w", p, err)
	}
	defer a.Body.Close()
	sub, err := narrowedBelow(p, a.Meta.RepoRoot)
	if err != nil {
		return err
	}
	if sub != "" {
		return w.narrowed(ctx, p, rel, a)
	}
	w.capture.Parts = append(w.capture.Parts, exports.Part{Path: p, Via: "archive", RepoRoot: a.Meta.RepoRoot})
	if err := w.copyArchive(rel, a.Body); err != nil {
		return fmt.Errorf("export: archive of %s: %w", p, err)
	}
	return nil
}

// download adds the regular file p (at rel).
func (w *workspace) download(ctx context.Context, p, rel string, exec bool) error {
	d, err := w.cl.DownloadFile(ctx, p)
	if gone(err) {
		w.skip(p, "file", "it was gone before it could be downloaded")
		return nil
	}
	if err != nil {
		return fmt.Errorf("export: download of %s: %w", p, err)
	}
	defer d.Body.Close()
	size, err := d.Size()
	if err != nil {
		return fmt.Errorf("export: download of %s: %w", p, err)
	}
	mode := int64(0o644)
	if exec {
		mode = 0o755
	}
	w.capture.Parts = append(w.capture.Parts, exports.Part{Path: p, Via: "download"})
	if err := w.b.File(rel, mode, size, time.Time{}, d.Body); err != nil {
		return fmt.Errorf("export: download of %s: %w", p, err)
	}
	return nil
}

// copyArchive copies an archive's members under at.
func (w *workspace) copyArchive(at string, body io.Reader) error {
	_, err := wsarchive.Read(body, func(m wsarchive.Member) error { return w.b.Copy(at, m) })
	return err
}

func (w *workspace) skip(p, typ, why string) {
	w.capture.Skipped = append(w.capture.Skipped, exports.Skipped{Path: p, Type: typ, Why: why})
}

// unlisted is the error of a narrowed archive whose other entries could
// not be listed: it says what was archived and what would be lost,
// naming the directories the agent-server can still list.
func (w *workspace) unlisted(ctx context.Context, dir, skip, repo string, cause error) error {
	lost := "everything in " + dir + " but " + skip
	if subs, err := w.cl.Subdirs(ctx, dir); err == nil {
		var names []string
		for _, s := range subs {
			if s.Name != skip {
				names = append(names, s.Name+"/")
			}
		}
		slices.Sort(names)
		if len(names) > 0 {
			lost = "the directories " + strings.Join(names, ", ") + " and the files in " + dir
		} else {
			lost = "the files in " + dir
		}
	}
	return fmt.Errorf("export: the agent-server archived only the repository %s, and the rest of %s could not be listed (%w): %s would be lost",
		repo, dir, cause, lost)
}

// gone says whether err is the agent-server's "not found" for a path
// (not a 404 of a route it does not have).
func gone(err error) bool {
	var ae *agentclient.Error
	return errors.As(err, &ae) && ae.Status == 404 && (ae.Detail == "File not found" || ae.Detail == "Directory not found")
}
