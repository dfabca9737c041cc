package core

import (
	"context"
	"fmt"
	"io"

	"github.com/canvasapp/companion/internal/units"
)

// Restore methods: how a restore brings an export back.
const (
	// RestoreSnapshot makes the new box from the export's snapshot of the
	// box (Snapshotter): its filesystem and volumes, with full fidelity.
	RestoreSnapshot = "snapshot"
	// RestoreFiles makes a fresh box with the account's provider and puts
	// the workspace archive's files back through its agent-server
	// (FileRestorer), re-hashing each one.
	RestoreFiles = "files"
)

// FileRestoreJob is what a FileRestorer puts back into one box.
type FileRestoreJob struct {
	// Endpoint reaches the new box's agent-server (a secret).
	Endpoint BoxEndpoint
	// Archive is the export's tar.gz; Index, when set, its file index
	// (ExportKindIndex), against which every file is checked.
	Archive ExportFile
	Index   *ExportFile
	// Open reads a file of the export; the reader fails at its end when
	// the file is not what the export recorded.
	Open func(name string) (io.ReadCloser, error)
	// Root is the directory in the box the archive's top directory
	// stands for: its members go below it. (An export made before
	// archives recorded their Root has an empty Archive.Root; its
	// archive's top directory, when not named like Root, was a
	// repository directly below it.)
	Root string
}

// FileRestoreResult is what a file restore put back.
type FileRestoreResult struct {
	Files, Dirs int
	Bytes       int64
	// Notes say what could not be put back as it was (file modes where
	// the box has no chmod, say), for the audit trail.
	Notes []string
}

// FileRestorer puts an export's workspace files into a running box
// through its agent-server: it waits for the agent-server to be ready,
// makes every directory, uploads every file while re-hashing it against
// the export, and reads each one back. Running it twice for one box is
// the same as running it once.
type FileRestorer interface {
	RestoreFiles(ctx context.Context, job FileRestoreJob, progress func(line string)) (FileRestoreResult, error)
}

// snapshotFiles are the export's snapshot files.
func (e ExportRecord) snapshotFiles() []ExportFile {
	var out []ExportFile
	for _, f := range e.Files {
		if f.Kind == ExportKindSnapshot {
			out = append(out, f)
		}
	}
	return out
}

// WorkspaceArchive is the export's full (tar.gz) workspace archive.
func (e ExportRecord) WorkspaceArchive() (ExportFile, bool) {
	for _, f := range e.Files {
		if f.Kind == ExportKindArchive && f.Format == ArchiveTarGz {
			return f, true
		}
	}
	return ExportFile{}, false
}

// fileIndex is the export's index of its tar.gz archive, if it has one.
func (e ExportRecord) fileIndex() *ExportFile {
	for _, f := range e.Files {
		if f.Kind == ExportKindIndex {
			return &f
		}
	}
	return nil
}

// archiveRoot is the box directory the archive's top directory stands
// for: its Root, else (an export made before Root was recorded) the
// repository the agent-server narrowed it to, else ArchivePath.
func archiveRoot(f ExportFile) string {
	if f.Root != "" {
		return f.Root
	}
	return ArchivePath
}

// Restorable reports whether the export can be restored at all: it is
// verified and holds a box snapshot or a workspace archive. Whether a
// given account can restore it is PreviewRestore's answer.
func (e ExportRecord) Restorable() bool {
	if !e.Verified {
		return false
	}
	_, ok := e.WorkspaceArchive()
	return ok || len(e.snapshotFiles()) > 0
}

// RestorePreview says, before anything is made, how a restore would go
// and what it brings back and what not.
type RestorePreview struct {
	ExportID  string
	AccountID string
	Provider  string
	Method    string
	// Dest is the directory the workspace files go into in the new box
	// (files method).
	Dest string
	// Files and Bytes are the regular files the archive holds (files
	// method; 0 when the export did not count them).
	Files int64
	Bytes int64
	// BringsBack and Cannot are sentences for the confirmation dialog.
	BringsBack []string
	Cannot     []string
}

// PreviewRestore says how RestoreExport would restore an export of owner
// with req, without making anything.
func (s *Service) PreviewRestore(ctx context.Context, owner, exportID string, req RestoreRequest) (RestorePreview, error) {
	rec, acct, _, method, err := s.planRestore(ctx, owner, exportID, req)
	if err != nil {
		return RestorePreview{}, err
	}
	pv := RestorePreview{ExportID: rec.ID, AccountID: acct.ID, Provider: acct.Provider, Method: method}
	always := []string{
		"the processes and memory of the exported box: the new box starts anew",
		"the agent-server key: the new box gets a new one",
		"the conversations' live state: the new box's agent starts with none; their trajectories stay in the export as zips",
	}
	switch method {
	case RestoreSnapshot:
		pv.BringsBack = []string{"the box's filesystem as the export's snapshot holds it: its volumes and every path its container changed, as a new " + acct.Provider + " box"}
		pv.Cannot = append(always, "bind mounts: their data is on the host, not in the snapshot")
	case RestoreFiles:
		a, _ := rec.WorkspaceArchive()
		root := archiveRoot(a)
		pv.Dest, pv.Files, pv.Bytes = root, a.Entries, a.ContentBytes
		what := "every file and directory of " + root
		if a.Entries > 0 {
			what += fmt.Sprintf(" the export holds (%d files, %s)", a.Entries, units.Bytes(a.ContentBytes))
		}
		check := "each checked against the export's SHA-256 as it is uploaded"
		if rec.fileIndex() == nil {
			check = "the archive checked against the export's SHA-256 before and while it is uploaded"
		}
		pv.BringsBack = []string{what + ", into a new " + acct.Provider + " box through its agent-server, " + check + " and read back from the new box"}
		pv.Cannot = append(always,
			"anything outside "+root+": installed packages, caches and system changes of the exported box",
			"what the export does not hold: symbolic links and special files, and git's credential-bearing files (.git/config, credentials, FETCH_HEAD, reflogs)",
			"file modes other than the executable bit, and file times")
	}
	return pv, nil
}

// planRestore finds the export, the account that makes the new box and
// the method. It makes nothing.
func (s *Service) planRestore(ctx context.Context, owner, exportID string, req RestoreRequest) (ExportRecord, Account, Provider, string, error) {
	if s.restoreStore() == nil || s.exportStore() == nil {
		return ExportRecord{}, Account{}, nil, "", Errorf(KindUnavailable, "restores are not configured in this companion")
	}
	switch req.Method {
	case "", RestoreSnapshot, RestoreFiles:
	default:
		return ExportRecord{}, Account{}, nil, "", Errorf(KindInvalid, "method must be %q or %q (or left out), not %q", RestoreSnapshot, RestoreFiles, req.Method)
	}
	rec, err := s.Export(ctx, owner, exportID)
	if err != nil {
		return ExportRecord{}, Account{}, nil, "", err
	}
	if !rec.Verified {
		return ExportRecord{}, Account{}, nil, "", unverified(rec, "only a verified export can be restored")
	}
	if !rec.Restorable() {
		return ExportRecord{}, Account{}, nil, "", Errorf(KindInvalid, "export %s holds neither a workspace archive nor a box snapshot (the agent-server had nothing to archive), so it cannot be restored; its trajectories can still be downloaded", rec.ID)
	}
	var orig Workspace
	if w, err := s.cfg.Store.GetWorkspace(ctx, rec.WorkspaceID); err == nil && w.Owner == owner {
		orig = w
	}
	acct, p, method, err := s.restoreAccount(ctx, owner, rec, orig, req)
	if err != nil {
		return ExportRecord{}, Account{}, nil, "", err
	}
	return rec, acct, p, method, nil
}

// restoreMethod is how p can restore rec ("" and the reason when it
// cannot), given the method asked for ("" for the best one).
func (s *Service) restoreMethod(rec ExportRecord, p Provider, info ProviderInfo, want string) (string, string) {
	_, snap := p.(Snapshotter)
	hasSnap := len(rec.snapshotFiles()) > 0
	_, hasArchive := rec.WorkspaceArchive()
	_, reach := p.(EndpointReporter)
	if (want == "" || want == RestoreSnapshot) && snap && hasSnap {
		return RestoreSnapshot, ""
	}
	if (want == "" || want == RestoreFiles) && hasArchive && reach && s.cfg.Restorer != nil {
		return RestoreFiles, ""
	}
	switch {
	case want == RestoreSnapshot && !hasSnap:
		return "", fmt.Sprintf("export %s holds no box snapshot (only exports of Docker workspaces do)", rec.ID)
	case want == RestoreSnapshot:
		return "", fmt.Sprintf("provider %s cannot restore a box snapshot", info.Name)
	case !hasArchive:
		return "", fmt.Sprintf("export %s holds no workspace archive, and provider %s cannot restore its box snapshot", rec.ID, info.Name)
	case s.cfg.Restorer == nil:
		return "", "this companion cannot put files into a box"
	}
	return "", fmt.Sprintf("provider %s cannot say where its boxes' agent-server is, so files cannot be put back into one", info.Name)
}
