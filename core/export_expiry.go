package core

import (
	"context"
	"fmt"
	"time"
)

// Export retention: an account's policy (RetentionPolicy.ExportsKeptFor)
// removes the files of its exports older than that, in serve only, as
// workspace retention deletes boxes. Three exports are never removed:
//
//   - the one a pending delete relies on (its journal names it), and the
//     one a pending restore reads;
//   - the newest verified export of a workspace that is not deleted: it is
//     what a provider's own deletion clock leaves (deletion.go);
//   - any export while its workspace's lock is held (an action runs).
//
// A removal marks the record expiring first, so nothing starts to rely on
// it, then removes the files, then marks it expired; the next tick
// finishes a removal a restart cut short. The record stays, as history.

// AuditExportExpire is the audit action of an export removed by
// retention.
const AuditExportExpire = "export_expire"

// exportExpiryBatch bounds the exports one tick expires per account.
const exportExpiryBatch = 100

// exportsPreviewLimit bounds the exports a preview lists.
const exportsPreviewLimit = 500

// ExportExpiryItem is one due export a policy would remove, or keeps.
type ExportExpiryItem struct {
	Export ExportRecord
	// Kept says why it is not removed ("" when it is).
	Kept string
}

// exportsDue reports whether p removes exports at all.
func (p RetentionPolicy) exportsDue() bool { return p.ExportsKeptFor > 0 }

// exportProtection is what, at one moment, keeps exports from expiring:
// the exports pending deletes rely on and pending restores read.
type exportProtection struct {
	pending map[string]string // export id → why
}

// protectedExports reads the journal for the exports its pending entries
// rely on.
func (s *Service) protectedExports(ctx context.Context) (exportProtection, error) {
	ops, err := s.cfg.Store.PendingOps(ctx)
	if err != nil {
		return exportProtection{}, fmt.Errorf("read the journal: %w", err)
	}
	pr := exportProtection{pending: map[string]string{}}
	for _, op := range ops {
		switch {
		case op.Kind == OpDelete && op.Delete != nil && op.Delete.ExportID != "":
			pr.pending[op.Delete.ExportID] = "a pending delete of its workspace relies on it"
		case op.Kind == OpRestore && s.restoreStore() != nil:
			rr, err := s.restoreStore().GetRestore(ctx, op.WorkspaceID)
			if err != nil && !IsKind(err, KindNotFound) {
				return exportProtection{}, fmt.Errorf("read the restore of %s: %w", op.WorkspaceID, err)
			}
			if err == nil {
				pr.pending[rr.ExportID] = "a pending restore reads it"
			}
		}
	}
	return pr, nil
}

// keptBecause says why rec must not expire now ("" when it may); ws is
// its workspace as last read (found: ok).
func keptBecause(rec ExportRecord, pr exportProtection, ws Workspace, ok bool) string {
	if why, pending := pr.pending[rec.ID]; pending {
		return why
	}
	if ok && ws.State != StateDeleted && ws.LastExportID == rec.ID {
		return "it is the newest export of a workspace that still exists"
	}
	return ""
}

// expireExports removes the files of p's account's exports older than
// p.ExportsKeptFor (one batch per tick). pr is the tick's protection,
// read from the journal by the first account that has exports due.
func (s *Service) expireExports(ctx context.Context, p RetentionPolicy, now time.Time, pr **exportProtection, rep *RetentionTickReport) error {
	rm, ok := s.cfg.Exporter.(ExportRemover)
	store := s.exportStore()
	if !ok || store == nil {
		return nil
	}
	list, err := store.ExportsToExpire(ctx, p.AccountID, now.Add(-p.ExportsKeptFor), exportExpiryBatch)
	if err != nil || len(list) == 0 {
		return err
	}
	if *pr == nil {
		read, err := s.protectedExports(ctx)
		if err != nil {
			return err
		}
		*pr = &read
	}
	for _, rec := range list {
		if ctx.Err() != nil {
			return nil
		}
		s.expireOne(ctx, rm, rec, p, **pr, rep)
	}
	return nil
}

// expireOne removes one export's files under its workspace's lock.
func (s *Service) expireOne(ctx context.Context, rm ExportRemover, rec ExportRecord, p RetentionPolicy, pr exportProtection, rep *RetentionTickReport) {
	unlock, ok := s.locks.tryLock(rec.WorkspaceID)
	if !ok {
		rep.ExportsKept++ // an action runs on its workspace: next tick
		return
	}
	defer unlock()
	store := s.exportStore()
	rec, err := store.GetExport(ctx, rec.ID)
	if err != nil {
		rep.Err = err
		return
	}
	if rec.State == ExportVerified {
		ws, found, err := s.fresh(ctx, rec.WorkspaceID)
		if err != nil {
			rep.Err = err
			return
		}
		if why := keptBecause(rec, pr, ws, found); why != "" {
			s.log.Debug("export retention keeps an export", "export", rec.ID, "reason", why)
			rep.ExportsKept++
			return
		}
		rec.State, rec.Verified, rec.UpdatedAt = ExportExpiring, false, s.now()
		rec.Error = fmt.Sprintf("removed by the account's export retention (exports are kept %s)", humanDuration(p.ExportsKeptFor))
		if err := store.PutExport(ctx, rec); err != nil {
			rep.Err = err
			return
		}
	} else if rec.State != ExportExpiring {
		return // changed since the query
	}
	n, err := rm.RemoveExport(ctx, rec)
	if err != nil {
		s.log.Warn("export retention could not remove an export's files; the next tick tries again", "export", rec.ID, "err", err)
		rep.ExportErrors++
		return
	}
	rec.State, rec.UpdatedAt = ExportExpired, s.now()
	if err := store.PutExport(ctx, rec); err != nil {
		rep.Err = err
		return
	}
	s.audit(ctx, AuditEntry{Owner: rec.Owner, Actor: ActorRetention, Action: AuditExportExpire, WorkspaceID: rec.WorkspaceID,
		AccountID: rec.AccountID, Provider: rec.Provider, ExportSHA256: exportSHA256(rec),
		Outcome: fmt.Sprintf("removed export %s made %s (%d bytes): older than %s", rec.ID, rec.CreatedAt.UTC().Format(time.RFC3339), n, humanDuration(p.ExportsKeptFor))})
	s.log.Info("export retention removed an export", "export", rec.ID, "workspace", rec.WorkspaceID, "bytes", n)
	rep.ExportsExpired++
}

// ExportsPreview is what a proposed policy would remove of a person's
// exports at its next tick, and what it keeps and why.
type ExportsPreview struct {
	// Exports are those due, oldest first: at most exportsPreviewLimit.
	Exports []ExportExpiryItem
	// Removed and Bytes count the removals among all those due (More:
	// more were due than one preview reads).
	Removed int
	Bytes   int64
	More    bool
}

// exportsPreviewScan bounds the records one preview reads.
const exportsPreviewScan = 10000

// previewExports answers what p would remove of owner's exports on its
// account now. It reads companion's records only, from memory where it
// can (the tick reads them afresh).
func (s *Service) previewExports(ctx context.Context, owner string, p RetentionPolicy, now time.Time) (ExportsPreview, error) {
	out := ExportsPreview{Exports: []ExportExpiryItem{}}
	store := s.exportStore()
	if !p.exportsDue() || store == nil {
		return out, nil
	}
	pr, err := s.protectedExports(ctx)
	if err != nil {
		return out, err
	}
	list, err := store.ExportsToExpire(ctx, p.AccountID, now.Add(-p.ExportsKeptFor), exportsPreviewScan)
	if err != nil {
		return out, err
	}
	out.More = len(list) == exportsPreviewScan
	for _, rec := range list {
		if rec.Owner != owner {
			continue
		}
		ws, ok := s.feed.Get(rec.WorkspaceID)
		kept := ""
		if rec.State == ExportVerified {
			kept = keptBecause(rec, pr, ws, ok)
		}
		if kept == "" {
			out.Removed++
			out.Bytes += rec.Bytes
		}
		if len(out.Exports) < exportsPreviewLimit {
			out.Exports = append(out.Exports, ExportExpiryItem{Export: rec, Kept: kept})
		}
	}
	return out, nil
}

// unverified is the error of an action that needs rec's files, rec not
// being verified; what says what cannot be done.
func unverified(rec ExportRecord, what string) error {
	if rec.State == ExportExpiring || rec.State == ExportExpired {
		return &Error{Kind: KindConflict, Message: fmt.Sprintf("export %s expired on %s: its files were %s; %s",
			rec.ID, rec.UpdatedAt.UTC().Format(time.RFC3339), rec.Error, what)}
	}
	return &Error{Kind: KindConflict, Message: fmt.Sprintf("export %s is %s, not verified: %s", rec.ID, rec.State, what)}
}

// humanDuration writes d in days when it is whole days, else as Go does.
func humanDuration(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		if n := d / (24 * time.Hour); n != 1 {
			return fmt.Sprintf("%d days", n)
		}
		return "1 day"
	}
	return d.String()
}
