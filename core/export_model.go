package core

import (
	"context"
	"io"
	"time"
)

// Export record states. A record is written "running" before anything is
// captured; only a read-back that matched makes it "verified". A crash
// leaves "running", which the next start turns into "failed"
// (RecoverExports): no record ever says verified without its verified
// directory.
const (
	ExportRunning  = "running"
	ExportVerified = "verified"
	ExportFailed   = "failed"
	// ExportExpiring and ExportExpired are a verified export whose files
	// its account's retention policy is removing, and has removed
	// (export_expiry.go). The record stays.
	ExportExpiring = "expiring"
	ExportExpired  = "expired"
)

// Export formats of the workspace archive.
const (
	ArchiveTarGz    = "tar.gz"
	ArchiveGitDelta = "git-delta"
)

// Kinds of export file (ExportFile.Kind). ExportKindSnapshot is in
// snapshot.go.
const (
	// ExportKindTrajectory is one conversation's trajectory zip.
	ExportKindTrajectory = "trajectory"
	// ExportKindArchive is the workspace archive: the full tar.gz, or the
	// compact git-delta.
	ExportKindArchive = "archive"
	// ExportKindIndex lists every entry of the tar.gz archive with its
	// size, mode and SHA-256 (JSON lines), so a restore can check each
	// file it puts back.
	ExportKindIndex = "index"
	// ExportKindManifest is manifest.json, written last.
	ExportKindManifest = "manifest"
)

// AuditExport is the audit action of an export.
const AuditExport = "export"

// OpExport journals an export. Its workspace keeps its state while it
// runs, so Recover never re-runs one: the record is failed at start-up.
const OpExport OpKind = "export"

// ExportFile is one file of an export.
type ExportFile struct {
	Name           string `json:"name"`
	Kind           string `json:"kind"`
	ConversationID string `json:"conversation_id,omitempty"`
	Format         string `json:"format,omitempty"`
	Bytes          int64  `json:"bytes"`
	SHA256         string `json:"sha256"`
	// Root is, for the tar.gz archive, the directory in the box its top
	// directory stands for (its members go back under path.Dir(Root)).
	Root string `json:"root,omitempty"`
	// Entries and ContentBytes count the regular files the tar.gz
	// archive holds and their bytes (0 in exports made before they were
	// counted).
	Entries      int64 `json:"entries,omitempty"`
	ContentBytes int64 `json:"content_bytes,omitempty"`
}

// ExportRecord is companion's record of one export.
type ExportRecord struct {
	ID          string
	WorkspaceID string
	Owner       string
	// WorkspaceName, Provider and AccountID say what the export was of,
	// as it was when the export began: they outlive the workspace.
	WorkspaceName string
	Provider      string
	AccountID     string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	State         string
	// Dir is the verified export's directory (set once verified).
	Dir   string
	Files []ExportFile
	Bytes int64
	// ArchiveSHA256 is the SHA-256 of the full (tar.gz) archive.
	ArchiveSHA256 string
	Verified      bool
	Error         string
}

// newExportRecord is the record of an export of ws beginning now:
// running, and saying what it is of.
func newExportRecord(ws Workspace, now time.Time) ExportRecord {
	return ExportRecord{ID: NewID("exp"), WorkspaceID: ws.ID, Owner: ws.Owner, WorkspaceName: ws.Name,
		Provider: ws.Provider, AccountID: ws.AccountID, CreatedAt: now, UpdatedAt: now, State: ExportRunning}
}

// ExportStore keeps export records. db implements it.
type ExportStore interface {
	PutExport(ctx context.Context, e ExportRecord) error
	// GetExport returns the record; unknown id: KindNotFound.
	GetExport(ctx context.Context, id string) (ExportRecord, error)
	// ListExports returns a workspace's records, newest first.
	ListExports(ctx context.Context, workspaceID string) ([]ExportRecord, error)
	// ListOwnerExports returns owner's records newest first (created_at,
	// then id, descending), at most limit (> 0): from the newest when
	// before is "", else those older than the record before names. A
	// before that is not one of owner's records is KindInvalid.
	ListOwnerExports(ctx context.Context, owner, before string, limit int) ([]ExportRecord, error)
	// UnfinishedExports returns every running record, oldest first.
	UnfinishedExports(ctx context.Context) ([]ExportRecord, error)
	// ExportsToExpire returns the account's expiring records, then its
	// verified ones made at or before madeBefore, oldest first: at most
	// limit in all.
	ExportsToExpire(ctx context.Context, accountID string, madeBefore time.Time, limit int) ([]ExportRecord, error)
	// GiveExports changes the owner of a workspace's records owned by from
	// to to (PutExport keeps an owner as first written) and returns how
	// many changed.
	GiveExports(ctx context.Context, workspaceID, from, to string) (int, error)
}

// BoxEndpoint is how companion reaches a box's agent-server: its URL, the
// extra headers the provider's proxy wants, and the session key. It is
// secret (the key, and proxy tokens in headers): never logged or stored.
type BoxEndpoint struct {
	URL string
	// Headers are sent on every request (canonical names).
	Headers    map[string][]string
	SessionKey string
}

// ExportJob is what one export captures.
type ExportJob struct {
	// ExportID is the export's record, written running before the job
	// starts; the exporter marks its staging files with it (StagingSweeper).
	ExportID    string
	WorkspaceID string
	// Owner is the workspace's owner ("" on the desktop): an export
	// store files exports under it.
	Owner    string
	BoxID    string
	Endpoint BoxEndpoint
	// ArchivePath is the directory of the box the workspace archive
	// holds (ArchivePath).
	ArchivePath string
	// GitDelta adds the compact git-delta archive to the full tar.gz.
	GitDelta bool
	// Snapshot, when set, streams the provider's snapshot of the box
	// (Snapshotter) into the export as files of Kind ExportKindSnapshot.
	Snapshot func(ctx context.Context, sink SnapshotSink) error
}

// ExportProgress is one progress report: the step running and the bytes
// of the export written so far.
type ExportProgress struct {
	Step  string
	Bytes int64
}

// ExportResult is a verified export.
type ExportResult struct {
	Dir           string
	Files         []ExportFile
	Bytes         int64
	ArchiveSHA256 string
	// NothingToArchive is set when the agent-server said the archive path
	// holds nothing it can archive (400): the export holds the
	// trajectories only, and a delete may proceed.
	NothingToArchive bool
}

// ExportVerifier is implemented by exporters that can re-check a verified
// export on disk (every file against its recorded SHA-256). The delete
// pipeline calls it before it trusts an export with a box.
type ExportVerifier interface {
	VerifyExport(ctx context.Context, dir string) error
}

// ExportOpener is implemented by exporters that keep exports somewhere
// other than a local directory: downloads and restores read an export's
// files through it. Without it they are read from the record's Dir.
type ExportOpener interface {
	OpenExportFile(ctx context.Context, rec ExportRecord, name string) (io.ReadSeekCloser, error)
}

// ExportRemover is implemented by exporters that can remove a verified
// export's files, for export retention. Removing what is already gone is
// no error; the bytes are those it removed.
type ExportRemover interface {
	RemoveExport(ctx context.Context, rec ExportRecord) (bytes int64, err error)
}

// StagingFiles is the staging directory of an export not committed.
type StagingFiles struct {
	WorkspaceID string
	// ExportID is the record it was written for; empty when its name
	// carries none (written by an older companion).
	ExportID string
	Dir      string
}

// StagingSweeper is implemented by exporters whose staging files can be
// listed and removed. On a store shared by replicas (and a shared export
// dir) core removes a staging directory only when its export record shows
// nobody can still be writing it (SweepStaging).
type StagingSweeper interface {
	// Staging lists the staging directories of workspaceID, or of every
	// workspace when it is empty.
	Staging(ctx context.Context, workspaceID string) ([]StagingFiles, error)
	// RemoveStaging deletes one and returns the bytes it held.
	RemoveStaging(ctx context.Context, f StagingFiles) (int64, error)
}

// Exporter captures a box's trajectories and archive into a verified
// export on durable storage. An error means nothing was kept.
type Exporter interface {
	Export(ctx context.Context, job ExportJob, progress func(ExportProgress)) (ExportResult, error)
}
