package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ExportOptions are the choices of one export request.
type ExportOptions struct {
	// Wake resumes a paused box for the export. Without it a paused
	// workspace is refused: an export reaches the box, and waking it costs
	// money and moves its idle clock.
	Wake bool
	// GitDelta adds the compact git-delta archive to the full tar.gz.
	GitDelta bool
	// PauseAgain pauses a box woken for the export once it ends, as the
	// guard does: the person wanted the work kept, not the box running.
	PauseAgain bool
}

// exportsConfigured reports whether this companion can export at all: an
// exporter, and a store for the export records.
func (s *Service) exportsConfigured() bool {
	return s.cfg.Exporter != nil && s.exportStore() != nil
}

func (s *Service) exportStore() ExportStore {
	if s.cfg.Exports != nil {
		return s.cfg.Exports
	}
	es, _ := s.cfg.Store.(ExportStore)
	return es
}

// StartExport begins an export of a workspace and returns its record,
// still running. It is person-initiated by design: it is the only kind of
// request companion sends into a box that moves the box's idle clock (the
// archive route counts as activity). The workspace's lock is held until
// the export ends; progress is published on the workspace (Progress).
func (s *Service) StartExport(ctx context.Context, owner, id string, o ExportOptions) (ExportRecord, error) {
	store := s.exportStore()
	if s.cfg.Exporter == nil || store == nil {
		return ExportRecord{}, Errorf(KindUnavailable, "exports are not configured in this companion")
	}
	ws, acct, p, info, unlock, err := s.acquire(ctx, owner, id)
	if err != nil {
		return ExportRecord{}, err
	}
	release := true
	defer func() {
		if release {
			unlock()
		}
	}()
	if ws, err = s.refresh(ctx, ws, acct, p); err != nil {
		return ExportRecord{}, err
	}
	switch {
	case ws.State == StateRunning:
	case ws.State == StatePaused && !o.Wake:
		return ExportRecord{}, &Error{Kind: KindConflict, State: ws.State, Message: fmt.Sprintf(
			"workspace %s is paused; an export does not wake it unless asked (wake=true), since waking bills and moves its idle clock", ws.ID)}
	case ws.State == StatePaused && !info.Capabilities.Suspend:
		return ExportRecord{}, Errorf(KindInvalid, "provider %s cannot resume workspace %s for an export", info.Name, ws.ID)
	case ws.State == StatePaused:
	default:
		return ExportRecord{}, illegal(ws, "export")
	}
	now := s.now()
	rec := newExportRecord(ws, now)
	op, err := s.cfg.Store.PutOp(ctx, Op{WorkspaceID: ws.ID, Kind: OpExport, Step: "requested", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		return ExportRecord{}, err
	}
	if err := store.PutExport(ctx, rec); err != nil {
		s.dropOp(op)
		return ExportRecord{}, err
	}
	actor := ActorOf(ctx, ActorRecovery)
	s.audit(ctx, AuditEntry{Owner: ws.Owner, Actor: actor, Action: AuditExport, WorkspaceID: ws.ID,
		AccountID: ws.AccountID, Provider: ws.Provider, Outcome: "started"})
	s.log.Info("workspace export started", "workspace", ws.ID, "export", rec.ID, "wake", ws.State == StatePaused)
	release = false
	s.goOp(op, unlock, func(ctx context.Context) { s.runExport(ctx, op, rec, ws, acct, p, info, o, actor) })
	return rec, nil
}

func (s *Service) runExport(ctx context.Context, op Op, rec ExportRecord, ws Workspace, acct Account, p Provider, info ProviderInfo, o ExportOptions, actor string) {
	var re recordingError
	woke := ws.State == StatePaused || ws.State == StateStopped
	_, w, err := s.exportWith(ctx, &op, rec, ws, acct, p, info, o, actor)
	if errors.As(err, &re) {
		return // the op stays: the next start fails the record
	}
	if o.PauseAgain && woke && ctx.Err() == nil {
		s.pauseAgain(ctx, &op, w, acct, p, actor, "asked with it")
	}
	s.dropOp(op)
}

// recordingError is a failure to record an export's outcome.
type recordingError struct{ error }

func (e recordingError) Unwrap() error { return e.error }

// exportWith captures an export of ws into record rec (already stored,
// running) under the caller's journal entry, records its outcome, audits
// it and, verified, notes it on the workspace (LastExportAt). It returns
// the record as stored, the workspace as the capture left it (woken), and
// the capture's error; a failure to record the outcome is a
// recordingError.
func (s *Service) exportWith(ctx context.Context, op *Op, rec ExportRecord, ws Workspace, acct Account, p Provider, info ProviderInfo, o ExportOptions, actor string) (ExportRecord, Workspace, error) {
	res, ws, err := s.captureExport(ctx, op, rec.ID, ws, acct, p, info, o, actor)
	sctx := context.WithoutCancel(ctx)
	// Whatever happened, the workspace's progress line ends with it.
	if cur, ok := s.feed.Get(ws.ID); ok && cur.Progress != "" {
		cur.Progress = ""
		if saved, serr := s.feed.Save(sctx, cur); serr != nil {
			s.log.Warn("could not clear export progress", "workspace", ws.ID, "err", serr)
		} else {
			ws = saved
		}
	}
	rec.UpdatedAt = s.now()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("companion stopped during the export: %w", err)
		}
		rec.State, rec.Error = ExportFailed, messageOf(err)
	} else {
		rec.State, rec.Verified = ExportVerified, true
		rec.Dir, rec.Files, rec.Bytes, rec.ArchiveSHA256 = res.Dir, res.Files, res.Bytes, res.ArchiveSHA256
	}
	if perr := s.exportStore().PutExport(sctx, rec); perr != nil {
		s.log.Error("could not record the export's outcome", "workspace", ws.ID, "export", rec.ID, "err", perr)
		return rec, ws, recordingError{perr}
	}
	s.observer().Exported(rec)
	s.audit(sctx, AuditEntry{Owner: ws.Owner, Actor: actor, Action: AuditExport, WorkspaceID: ws.ID,
		AccountID: ws.AccountID, Provider: ws.Provider, Outcome: outcomeOf(err), ExportSHA256: rec.ArchiveSHA256})
	if err != nil {
		s.emit(sctx, exportFailedEvent(rec, ws))
		s.log.Warn("workspace export failed", "workspace", ws.ID, "export", rec.ID, "err", messageOf(err))
		return rec, ws, err
	}
	s.noteExport(sctx, rec)
	if cur, ok := s.feed.Get(ws.ID); ok {
		ws = cur
	}
	s.log.Info("workspace export verified", "workspace", ws.ID, "export", rec.ID, "bytes", rec.Bytes, "dir", rec.Dir)
	return rec, ws, nil
}

// captureExport wakes the box when asked, finds its agent-server and runs
// the exporter.
func (s *Service) captureExport(ctx context.Context, op *Op, exportID string, ws Workspace, acct Account, p Provider, info ProviderInfo, o ExportOptions, actor string) (ExportResult, Workspace, error) {
	if ws.State == StatePaused || ws.State == StateStopped {
		var box Box
		err := s.retry(ctx, op, s.budgetFor(acct, p), "wake", func(ctx context.Context) error {
			b, err := p.Resume(ctx, acct, ws.BoxID)
			box = b
			return err
		})
		if err != nil {
			return ExportResult{}, ws, fmt.Errorf("wake the box for the export: %w", err)
		}
		ws = s.applyBox(ws, box)
		ws.Error = ""
		saved, err := s.feed.Save(ctx, ws)
		if err != nil {
			return ExportResult{}, ws, err
		}
		ws = saved
		s.audit(ctx, AuditEntry{Owner: ws.Owner, Actor: actor, Action: AuditResume, WorkspaceID: ws.ID,
			AccountID: ws.AccountID, Provider: ws.Provider, Outcome: "ok"})
	}
	// Only the provider knows how its boxes are reached and which URL may
	// be trusted with the session key, so there is no guess here.
	var ep BoxEndpoint
	err := s.retry(ctx, op, s.budgetFor(acct, p), "endpoint", func(ctx context.Context) error {
		var err error
		ep, err = s.boxEndpoint(ctx, ws, acct, p, info)
		return err
	})
	if err != nil {
		return ExportResult{}, ws, fmt.Errorf("reach the box's agent-server: %w", err)
	}
	prog := s.newProgress(ctx, ws)
	defer prog.stop()
	// What the agent-server says is worth retrying is retried, as in the
	// delete's export: a box just woken may not be listening yet.
	var res ExportResult
	err = s.retry(ctx, op, budget{provider: acct.Provider, limit: s.cfg.ExportBudget, own: true}, "capture", func(ctx context.Context) error {
		var err error
		res, err = s.cfg.Exporter.Export(ctx, exportJob(exportID, ws, acct, p, ep, o.GitDelta),
			func(pr ExportProgress) { prog.report(fmt.Sprintf("export: %s, %d bytes", pr.Step, pr.Bytes)) })
		return err
	})
	return res, ws, err
}

// exportJob is what an export of ws captures, the same for a person's
// export and a delete's: every conversation's trajectory, the workspace
// archive (and the git delta when asked), and the box's snapshot where
// the adapter can take one, so that any export can be restored.
func exportJob(exportID string, ws Workspace, acct Account, p Provider, ep BoxEndpoint, gitDelta bool) ExportJob {
	job := ExportJob{ExportID: exportID, WorkspaceID: ws.ID, Owner: ws.Owner, BoxID: ws.BoxID, Endpoint: ep, GitDelta: gitDelta,
		ArchivePath: ArchivePath}
	if sn, ok := p.(Snapshotter); ok {
		boxID := ws.BoxID
		job.Snapshot = func(ctx context.Context, sink SnapshotSink) error { return sn.Snapshot(ctx, acct, boxID, sink) }
	}
	return job
}

// boxEndpoint is where the box's agent-server is and the key it wants.
func (s *Service) boxEndpoint(ctx context.Context, ws Workspace, acct Account, p Provider, info ProviderInfo) (BoxEndpoint, error) {
	acc, err := s.agentAccess(ctx, ws, acct, p, info)
	if err != nil {
		return BoxEndpoint{}, err
	}
	ep := BoxEndpoint{URL: acc.Endpoint.URL, Headers: map[string][]string{}, SessionKey: acc.Key}
	for k, v := range acc.Endpoint.Headers {
		ep.Headers[k] = []string{v}
	}
	return ep, nil
}

// RecoverExports fails every export a previous run left running: its
// staging directory was swept, so it can never be verified. Each one's
// owner hears of it (export.failed). On a store shared by several
// replicas a running export may be another replica's, alive: the replica
// that takes over a dead one's journal entry fails that workspace's
// running exports instead (resumeClaimed).
func (s *Service) RecoverExports(ctx context.Context) error {
	store := s.exportStore()
	if store == nil || s.shared() {
		return nil
	}
	list, err := store.UnfinishedExports(ctx)
	if err != nil {
		return fmt.Errorf("list unfinished exports: %w", err)
	}
	for _, e := range list {
		if err := s.failInterrupted(ctx, store, e, "companion stopped before the export was verified; start a new export"); err != nil {
			return err
		}
	}
	if len(list) > 0 {
		s.log.Warn("exports interrupted by a restart were marked failed", "count", len(list))
	}
	return nil
}

// Exports lists a workspace's exports, newest first. Another owner's
// workspace is not found.
func (s *Service) Exports(ctx context.Context, owner, workspaceID string) ([]ExportRecord, error) {
	store := s.exportStore()
	if store == nil {
		return []ExportRecord{}, nil
	}
	list, err := store.ListExports(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	out := make([]ExportRecord, 0, len(list))
	for _, e := range list {
		if e.Owner == owner {
			out = append(out, e)
		}
	}
	// Exports outlive their workspace; an unknown workspace with none of
	// this owner's exports is not found.
	if len(out) == 0 {
		if _, err := s.Workspace(owner, workspaceID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Export returns one export record of owner.
func (s *Service) Export(ctx context.Context, owner, id string) (ExportRecord, error) {
	store := s.exportStore()
	if store == nil {
		return ExportRecord{}, Errorf(KindNotFound, "export %s not found", id)
	}
	e, err := store.GetExport(ctx, id)
	if err != nil {
		return ExportRecord{}, err
	}
	if e.Owner != owner {
		return ExportRecord{}, Errorf(KindNotFound, "export %s not found", id)
	}
	return e, nil
}

// OpenExportFile opens one file of a verified export of owner.
func (s *Service) OpenExportFile(ctx context.Context, owner, id, name string) (io.ReadSeekCloser, ExportFile, error) {
	e, err := s.Export(ctx, owner, id)
	if err != nil {
		return nil, ExportFile{}, err
	}
	if !e.Verified {
		return nil, ExportFile{}, unverified(e, "it has no files to download")
	}
	for _, f := range e.Files {
		if f.Name != name {
			continue
		}
		fh, err := s.openExportFile(ctx, e, f.Name)
		if err != nil {
			return nil, ExportFile{}, Errorf(KindNotFound, "file %s of export %s can no longer be read: %v", name, id, err)
		}
		return fh, f, nil
	}
	return nil, ExportFile{}, Errorf(KindNotFound, "export %s has no file %q", id, name)
}

// openExportFile opens a file of rec wherever the exporter keeps it.
func (s *Service) openExportFile(ctx context.Context, rec ExportRecord, name string) (io.ReadSeekCloser, error) {
	if o, ok := s.cfg.Exporter.(ExportOpener); ok {
		return o.OpenExportFile(ctx, rec, name)
	}
	return os.Open(filepath.Join(rec.Dir, name))
}
