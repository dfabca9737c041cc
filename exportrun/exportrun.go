// Package exportrun is core's Exporter: it reads a box's conversations,
// trajectory zips and workspace archive through agentclient and writes
// them into a verified export (package exports). It holds nothing whole in
// memory: every body streams from the box into the export's staging file.
//
// It runs one attempt: a failure aborts the export (nothing is kept) and
// is reported to the person who asked, who may ask again.
package exportrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/exports"
	"github.com/canvasapp/companion/exportstore"
	"github.com/canvasapp/companion/internal/agenterr"
)

// DefaultArchivePath is the directory archived when the job names none:
// the workspace directory of the agent-server image.
const DefaultArchivePath = "/workspace"

// Archive file names inside an export.
const (
	ArchiveName  = "workspace.tar.gz"
	GitDeltaName = "workspace.git-delta"
)

// progressEvery is how many bytes pass between progress reports within a
// file (core throttles what it publishes further).
const progressEvery = 4 << 20

// Exporter implements core.Exporter.
type Exporter struct {
	// Writer writes each export; with Store set, into a spool directory
	// from which it is uploaded (store.go).
	Writer *exports.Writer
	// Store, when set, is where exports are kept (--export-store).
	Store *exportstore.Store
	// StoreErr, when set, is why the configured store is not open: every
	// export fails with it.
	StoreErr error
	// HTTP is the client for the box; nil means one with no overall
	// timeout (archives take long; the context bounds them).
	HTTP *http.Client
	// Staged, when set, is called after each file is staged into an
	// export (test-only: the e2e crash and hold points); nil in production.
	Staged func(job core.ExportJob)
	// Uploaded, when set, is called after each file is in the store
	// (test-only, like Staged).
	Uploaded func(job core.ExportJob)
}

var (
	_ core.Exporter       = (*Exporter)(nil)
	_ core.StagingSweeper = (*Exporter)(nil)
)

// Staging lists the export dir's staging directories (core.StagingSweeper).
func (x *Exporter) Staging(ctx context.Context, workspaceID string) ([]core.StagingFiles, error) {
	ps, err := x.Writer.Partials(workspaceID)
	out := make([]core.StagingFiles, 0, len(ps))
	for _, p := range ps {
		out = append(out, core.StagingFiles{WorkspaceID: p.WorkspaceID, ExportID: p.Record, Dir: p.Dir})
	}
	return out, err
}

// RemoveStaging removes one staging directory (core.StagingSweeper).
func (x *Exporter) RemoveStaging(ctx context.Context, f core.StagingFiles) (int64, error) {
	return exports.Partial{WorkspaceID: f.WorkspaceID, Record: f.ExportID, Dir: f.Dir}.Remove()
}

// Export captures job's box into a new verified export. A failure the
// agent-server says is worth retrying (422, 429, 5xx, the network) comes
// back as a *core.Error of KindUnavailable or KindRateLimited carrying
// its Retry-After, so core's retry treats it as transient; every other
// failure (401/404 "capture unconfirmed", a full or unwritable export
// location, a read-back mismatch) is not.
func (x *Exporter) Export(ctx context.Context, job core.ExportJob, progress func(core.ExportProgress)) (core.ExportResult, error) {
	res, err := x.export(ctx, job, progress)
	return res, agenterr.Classify(err)
}

// VerifyExport re-reads a committed export and checks every file against
// its manifest (core.ExportVerifier).
func (x *Exporter) VerifyExport(ctx context.Context, dir string) error {
	ref, inStore, err := storeRef(dir)
	switch {
	case err != nil:
		return err
	case inStore:
		return x.verifyStored(ctx, ref)
	}
	_, err = exports.VerifyDir(dir)
	return err
}

func (x *Exporter) export(ctx context.Context, job core.ExportJob, progress func(core.ExportProgress)) (core.ExportResult, error) {
	if progress == nil {
		progress = func(core.ExportProgress) {}
	}
	if x.StoreErr != nil {
		return core.ExportResult{}, fmt.Errorf("export: %w", x.StoreErr)
	}
	cl, err := agentclient.New(agentclient.Endpoint{URL: job.Endpoint.URL, Headers: http.Header(job.Endpoint.Headers), SessionKey: job.Endpoint.SessionKey}, x.HTTP)
	if err != nil {
		return core.ExportResult{}, fmt.Errorf("export: %w", err)
	}
	progress(core.ExportProgress{Step: "conversations"})
	convs, err := cl.AllConversations(ctx)
	if err != nil {
		return core.ExportResult{}, fmt.Errorf("export: list conversations: %w", err)
	}
	e, err := x.Writer.BeginRecord(job.WorkspaceID, job.BoxID, job.ExportID)
	if err != nil {
		return core.ExportResult{}, err
	}
	done := false
	defer func() {
		if !done {
			e.Abort()
		}
	}()
	c := &counter{progress: progress}
	staged := func() {
		if x.Staged != nil {
			x.Staged(job)
		}
	}
	for i, conv := range convs {
		c.step = fmt.Sprintf("trajectory %d of %d", i+1, len(convs))
		d, err := cl.DownloadTrajectory(ctx, conv.ID)
		if err != nil {
			return core.ExportResult{}, fmt.Errorf("export: trajectory of conversation %s: %w", conv.ID, err)
		}
		_, err = e.Add(exports.File{Name: "trajectory-" + conv.HexID() + ".zip", Kind: exports.KindTrajectory, ConversationID: conv.ID}, c.wrap(d.Body))
		d.Body.Close()
		if err != nil {
			return core.ExportResult{}, err
		}
		staged()
	}
	root := job.ArchivePath
	if root == "" {
		root = DefaultArchivePath
	}
	ws, err := x.captureWorkspace(ctx, cl, e, root, c)
	if err != nil {
		return core.ExportResult{}, err
	}
	staged()
	if job.GitDelta {
		x.addGitDelta(ctx, cl, e, root, c)
		staged()
	}
	if job.Snapshot != nil {
		c.step = "snapshot"
		c.report()
		if err := job.Snapshot(ctx, sinkFunc(func(name, format string, r io.Reader) error {
			c.step = "snapshot " + name
			if _, err := e.Add(exports.File{Name: name, Kind: core.ExportKindSnapshot, Format: format}, c.wrap(r)); err != nil {
				return err
			}
			staged()
			return nil
		})); err != nil {
			return core.ExportResult{}, fmt.Errorf("export: snapshot of box %s: %w", job.BoxID, err)
		}
	}
	c.step = "verify"
	c.report()
	m, dir, err := e.Commit()
	if err != nil {
		return core.ExportResult{}, err
	}
	done = true
	res := core.ExportResult{Dir: dir, Bytes: m.Bytes, Files: make([]core.ExportFile, 0, len(m.Files)+1), NothingToArchive: ws.nothing}
	for _, f := range m.Files {
		res.Files = append(res.Files, core.ExportFile{Name: f.Name, Kind: f.Kind, ConversationID: f.ConversationID,
			Format: f.Format, Bytes: f.Bytes, SHA256: f.SHA256, Root: f.Root, Entries: f.Entries, ContentBytes: f.ContentBytes})
		if f.Kind == exports.KindArchive && f.Format == agentclient.FormatTarGz {
			res.ArchiveSHA256 = f.SHA256
		}
	}
	// The manifest is part of the export and downloadable like the rest.
	if st, sum, err := hashFile(filepath.Join(dir, exports.ManifestName)); err == nil {
		res.Files = append(res.Files, core.ExportFile{Name: exports.ManifestName, Kind: core.ExportKindManifest, Bytes: st, SHA256: sum})
	}
	if x.Store != nil {
		if res.Dir, err = x.upload(ctx, job, dir, res.Files, c); err != nil {
			os.RemoveAll(dir) // the spool copy is no export: nothing refers to it
			return core.ExportResult{}, err
		}
	}
	return res, nil
}

// counter counts the bytes of an export as they stream and reports them.
type counter struct {
	progress func(core.ExportProgress)
	step     string
	total    int64
	last     int64
}

func (c *counter) report() {
	c.progress(core.ExportProgress{Step: c.step, Bytes: c.total})
	c.last = c.total
}

func (c *counter) wrap(r io.Reader) io.Reader {
	c.report()
	return readFunc(func(p []byte) (int, error) {
		n, err := r.Read(p)
		c.total += int64(n)
		if c.total-c.last >= progressEvery {
			c.report()
		}
		return n, err
	})
}

// sinkFunc adapts a function to core.SnapshotSink.
type sinkFunc func(name, format string, r io.Reader) error

func (f sinkFunc) Add(name, format string, r io.Reader) error { return f(name, format, r) }

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

func hashFile(p string) (int64, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return n, hex.EncodeToString(h.Sum(nil)), err
}

// addGitDelta adds the compact git-delta archive of root. It is an extra
// beside the tar.gz, which holds everything: when the agent-server cannot
// make it (no repository, two of them, a git failure), the manifest says
// why and the export goes on.
func (x *Exporter) addGitDelta(ctx context.Context, cl *agentclient.Client, e *exports.Export, root string, c *counter) {
	c.step = "archive git-delta"
	a, err := cl.Archive(ctx, agentclient.ArchiveRequest{Path: root, Format: agentclient.FormatGitDelta})
	if err != nil {
		e.Note(fmt.Sprintf("no git-delta: %s", err))
		return
	}
	defer a.Body.Close()
	base := "empty tree"
	if a.Meta.BaseCommit != "" {
		base = "commit"
	}
	_, err = e.Add(exports.File{Name: GitDeltaName, Kind: exports.KindArchive, Format: agentclient.FormatGitDelta,
		Base: base, BaseCommit: a.Meta.BaseCommit, BaseRef: a.Meta.BaseRef, HeadCommit: a.Meta.HeadCommit,
		Branch: a.Meta.Branch, Remote: a.Meta.RepoRemote, RepoRoot: a.Meta.RepoRoot}, c.wrap(a.Body))
	if err != nil {
		e.Note(fmt.Sprintf("no git-delta: %s", err))
	}
}
