package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// DeleteExportMode says whether a delete needs a verified export first.
type DeleteExportMode string

const (
	// DeleteExportRequired (the default): a delete whose export fails is
	// blocked, and the box stays.
	DeleteExportRequired DeleteExportMode = "required"
	// DeleteExportBestEffort: a failed export is logged and audited, and
	// the delete goes ahead without it. Only an explicit account setting
	// chooses it.
	DeleteExportBestEffort DeleteExportMode = "best_effort"
)

// Effective is the mode a delete runs with: anything but best-effort is
// required.
func (m DeleteExportMode) Effective() DeleteExportMode {
	if m == DeleteExportBestEffort {
		return m
	}
	return DeleteExportRequired
}

// Delete pipeline steps, in order. Each is journaled (Op.Step, with the
// pipeline's DeleteJournal) before it starts, so a restart resumes at the
// step that was running.
const (
	StepLock           = "lock"
	StepRecheck        = "recheck"
	StepWake           = "wake"
	StepExport         = "export"
	StepVerify         = "verify"
	StepProviderDelete = "provider_delete"
	StepMarkDeleted    = "mark_deleted"
	// StepRepause is not on the way to a delete: a delete that blocks
	// after it woke the box journals it before pausing the box again.
	StepRepause = "repause"
)

// DeleteSteps are the pipeline's steps in order, then StepRepause, the
// one side step (taken only by a blocked delete that woke its box).
var DeleteSteps = []string{StepLock, StepRecheck, StepWake, StepExport, StepVerify, StepProviderDelete, StepMarkDeleted, StepRepause}

// DeleteJournal is what the delete pipeline keeps in its journal entry.
// Its one guarantee: the provider delete is only called when Verified is
// set (ExportID names a verified export) or NoExport says why there is
// none (best-effort mode, no exporter, a box that never finished its
// create).
type DeleteJournal struct {
	// State, BoxID and LastActivityAt are the workspace as the delete was
	// asked for; the re-check refuses to go on if the box differs.
	State          State     `json:"state"`
	BoxID          string    `json:"box_id"`
	LastActivityAt time.Time `json:"last_activity_at"`
	// AskedAt is when the delete was asked for: activity dated before it
	// (a figure read later drifts by its answer's latency) is not use since.
	AskedAt time.Time `json:"asked_at,omitempty"`
	// Actor asked for the delete (WithActor): a person's route, or the
	// retention policy.
	Actor string `json:"actor,omitempty"`
	// Mode is the account's export mode, fixed when the pipeline starts.
	Mode DeleteExportMode `json:"mode,omitempty"`
	// Woke is set when the pipeline resumed the box for the export.
	Woke bool `json:"woke,omitempty"`
	// ExportID is the export this delete made (running until Verified).
	ExportID     string `json:"export_id,omitempty"`
	Verified     bool   `json:"verified,omitempty"`
	ExportSHA256 string `json:"export_sha256,omitempty"`
	// Note records what the export found worth saying ("nothing to
	// archive").
	Note string `json:"note,omitempty"`
	// NoExport says why the delete proceeds without a verified export.
	NoExport string `json:"no_export,omitempty"`
	// Blocked is why the delete blocked, kept while a box the pipeline
	// woke is paused again (step StepRepause), so a restart finishes both.
	Blocked string `json:"blocked,omitempty"`
}

func newDeleteJournal(ws Workspace, actor string, now time.Time) *DeleteJournal {
	return &DeleteJournal{State: ws.State, BoxID: ws.BoxID, LastActivityAt: ws.LastActivityAt, AskedAt: now, Actor: actor}
}

// AuditAccountChange is the audit action of a changed account setting.
const AuditAccountChange = "account_change"

// deleteRun is one run of the pipeline for one journal entry.
type deleteRun struct {
	s    *Service
	op   *Op
	j    *DeleteJournal
	ws   Workspace // as saved in the feed: state deleting
	acct Account
	p    Provider
	info ProviderInfo
}

// resumeAt maps the step a journal entry last started to where a run
// picks up. A crashed export is re-done from scratch (its record was
// failed at start-up), after looking at the box again, since a wake is
// not undone by a crash; a crashed provider delete is called again (a
// missing box counts as deleted).
func resumeAt(step string) int {
	switch step {
	case StepWake, StepExport:
		return slices.Index(DeleteSteps, StepWake)
	case StepVerify:
		return slices.Index(DeleteSteps, StepVerify)
	case StepProviderDelete, StepMarkDeleted:
		return slices.Index(DeleteSteps, StepProviderDelete)
	}
	return 0 // requested, lock, recheck: from the start
}

// runDeletePipeline is the OpDelete runner: lock (held by launch) →
// re-check → wake if the export needs it → export → verify → provider
// delete → mark deleted. A failed required export blocks: the box stays,
// the workspace shows its real state with "delete blocked: …", and the
// audit entry says so.
func (s *Service) runDeletePipeline(ctx context.Context, op Op, ws Workspace, acct Account, p Provider, info ProviderInfo) {
	from := resumeAt(op.Step)
	if op.Delete == nil {
		// Journaled before the pipeline existed: start over, taking the
		// box as it is now as what was asked for.
		op.Delete = &DeleteJournal{BoxID: ws.BoxID, Actor: ActorRecovery}
		from = 0
	}
	d := &deleteRun{s: s, op: &op, j: op.Delete, ws: ws, acct: acct, p: p, info: info}
	if op.Step == StepRepause && d.j.Blocked != "" {
		// Blocked, then stopped before the woken box was paused again.
		d.repauseAndBlock(ctx, d.j.Blocked, nil)
		return
	}
	d.run(ctx, from)
}

func (d *deleteRun) run(ctx context.Context, from int) {
	s, j := d.s, d.j
	at := func(step string) bool { return from <= slices.Index(DeleteSteps, step) }
	if at(StepLock) {
		if j.Mode == "" {
			j.Mode = d.acct.DeleteExport.Effective()
		}
		if !d.step(ctx, StepLock) {
			return
		}
		if !d.step(ctx, StepRecheck) {
			return
		}
		if done := d.recheck(ctx); done {
			return
		}
	}
	if j.Mode == "" {
		j.Mode = DeleteExportRequired
	}
	if at(StepWake) && !j.Verified && j.NoExport == "" {
		if why := d.cannotExport(); why != "" {
			j.NoExport = why
		} else if !d.exportAll(ctx) {
			return
		}
	} else if at(StepVerify) && !j.Verified && j.NoExport == "" {
		if ok, redo := d.verify(ctx); !ok {
			if !redo || !d.exportAll(ctx) {
				return
			}
		}
	}
	if !j.Verified && j.NoExport == "" {
		// Unreachable by construction; the guard is the pipeline's promise.
		d.block(ctx, "no verified export is recorded for this delete, so the box was not deleted; delete again", nil)
		return
	}
	if !d.step(ctx, StepProviderDelete) {
		return
	}
	if !d.providerDelete(ctx) {
		return
	}
	if !d.step(ctx, StepMarkDeleted) {
		return
	}
	s.markGone(d.acct.ID, d.ws.BoxID)
	ws := d.ws
	ws.State, ws.Removed = StateDeleted, true
	outcome := "ok"
	switch {
	case j.NoExport != "":
		outcome = "ok (without a verified export: " + j.NoExport + ")"
	case j.Note != "":
		outcome = "ok (" + j.Note + ")"
	}
	s.finishAudited(ctx, *d.op, ws, nil, outcome, j.ExportSHA256)
}

// step journals the next step (with the journal) and calls the test hook.
func (d *deleteRun) step(ctx context.Context, name string) bool {
	s := d.s
	d.op.Step, d.op.Attempts, d.op.LastError, d.op.UpdatedAt = name, 0, "", s.now()
	if _, err := s.cfg.Store.PutOp(ctx, *d.op); err != nil {
		d.block(ctx, fmt.Sprintf("could not journal step %s (%s); nothing was deleted: delete again", name, messageOf(err)), err)
		return false
	}
	s.observer().DeleteStep(name)
	if h := s.cfg.StepHook; h != nil {
		h(OpDelete, name)
	}
	return true
}

// recheck re-reads the box and compares it with what the delete was asked
// for. It reports done when the run ended here (changed, already gone, or
// blocked).
func (d *deleteRun) recheck(ctx context.Context) (done bool) {
	s, j := d.s, d.j
	if d.ws.BoxID == "" {
		// A create that failed may still have made a box (its answer was
		// lost): find it by its label so it does not keep billing.
		if d.info.Capabilities.List {
			var box Box
			var found bool
			err := s.retry(ctx, d.op, s.budgetFor(d.acct, d.p), StepRecheck, func(ctx context.Context) error {
				b, ok, err := findByLabel(ctx, d.p, d.acct, d.ws.ID)
				box, found = b, ok
				return err
			})
			if err != nil {
				d.fail(ctx, "delete failed: could not look for a box left by the failed create: "+messageOf(err), err)
				return true
			}
			if found {
				d.ws.BoxID, d.ws.BoxURL = box.ID, box.URL
			}
		}
		if d.ws.BoxID == "" {
			ws := d.ws
			ws.State, ws.Removed = StateDeleted, true
			s.finishAudited(ctx, *d.op, ws, nil, "ok (it had no box)", "")
			return true
		}
	}
	if j.State == StateCreating || j.State == StateError {
		// A box whose create never finished holds no one's work.
		j.NoExport = "its create never finished, so its box holds no work"
		return false
	}
	var cur Workspace
	err := s.retry(ctx, d.op, s.budgetFor(d.acct, d.p), StepRecheck, func(ctx context.Context) error {
		var err error
		cur, err = s.reread(ctx, d.ws, d.acct, d.p)
		return err
	})
	if IsKind(err, KindNotFound) {
		ws := d.ws
		s.markGone(d.acct.ID, ws.BoxID)
		ws.State, ws.Removed = StateDeleted, true
		s.finishAudited(ctx, *d.op, ws, nil, "ok (the box was already gone)", "")
		return true
	}
	if err != nil {
		d.block(ctx, fmt.Sprintf("could not re-read box %s at %s (%s); nothing was deleted: delete again once the provider answers", d.ws.BoxID, d.ws.Provider, messageOf(err)), err)
		return true
	}
	if reason := j.changedIn(cur); reason != "" {
		if ctx.Err() != nil {
			return true
		}
		cur.Error = fmt.Sprintf("delete stopped: workspace %s changed since the delete was asked for (%s); nothing was deleted: preview again", d.ws.ID, reason)
		d.s.finishAudited(ctx, *d.op, cur, errors.New(cur.Error), "stopped: "+reason, "")
		return true
	}
	return false
}

// changedIn says how the box differs from what the delete was asked for,
// or "". Only settled states are compared: a journal without them (an
// entry from before the pipeline) accepts the box as it is.
func (j *DeleteJournal) changedIn(cur Workspace) string {
	switch j.State {
	case StateRunning, StatePaused, StateStopped:
	default:
		return ""
	}
	switch {
	case cur.BoxID != j.BoxID:
		return fmt.Sprintf("its box changed from %s to %s", j.BoxID, cur.BoxID)
	case cur.State != j.State && j.State != StateRunning && cur.State == StateRunning:
		return fmt.Sprintf("it was %s and was resumed", j.State)
	case cur.State != j.State:
		return fmt.Sprintf("it was %s and is now %s", j.State, cur.State)
	case usedSince(cur.LastActivityAt, j.LastActivityAt, j.AskedAt):
		return "it was used since"
	}
	return ""
}

// cannotExport says why no export can be made at all, or "" when one
// can be tried. Without an exporter (a companion embedded without one)
// deletes go ahead, as they did before exports existed; the binary always
// has one.
func (d *deleteRun) cannotExport() string {
	s := d.s
	if !s.exportsConfigured() {
		return "exports are not configured in this companion"
	}
	return ""
}

// exportAll wakes the box when it must, exports, and verifies. It reports
// whether the pipeline goes on (verified, or best-effort after a failure).
func (d *deleteRun) exportAll(ctx context.Context) bool {
	if !d.wake(ctx) {
		return false
	}
	if !d.export(ctx) {
		return false
	}
	if d.j.Verified || d.j.NoExport != "" {
		return true
	}
	ok, _ := d.verify(ctx)
	return ok
}

// wake resumes a paused or stopped box so its agent-server can answer.
func (d *deleteRun) wake(ctx context.Context) bool {
	s := d.s
	cur, err := s.reread(ctx, d.ws, d.acct, d.p)
	if err != nil {
		// The export will fail with the reason if the box cannot answer.
		s.log.Warn("could not read the box before its export", "workspace", d.ws.ID, "err", messageOf(err))
		return true
	}
	if cur.State != StatePaused && cur.State != StateStopped {
		return true
	}
	if !d.info.Capabilities.Suspend {
		return d.exportFailed(ctx, fmt.Sprintf("box %s is %s and provider %s cannot resume it for the export", d.ws.BoxID, cur.State, d.info.Name), nil)
	}
	d.j.Woke = true
	if !d.step(ctx, StepWake) {
		return false
	}
	var box Box
	err = s.retry(ctx, d.op, s.budgetFor(d.acct, d.p), StepWake, func(ctx context.Context) error {
		b, err := d.p.Resume(ctx, d.acct, d.ws.BoxID)
		box = b
		return err
	})
	if err != nil {
		return d.exportFailed(ctx, fmt.Sprintf("could not wake box %s for the export: %s", d.ws.BoxID, messageOf(err)), err)
	}
	if box.ID != "" && box.ID != d.ws.BoxID {
		d.ws.BoxID, d.ws.BoxURL = box.ID, box.URL
		if saved, err := s.feed.Save(ctx, d.ws); err == nil {
			d.ws = saved
		}
	}
	s.audit(ctx, AuditEntry{Owner: d.ws.Owner, Actor: d.j.Actor, Action: AuditResume, WorkspaceID: d.ws.ID,
		AccountID: d.ws.AccountID, Provider: d.ws.Provider, Outcome: "ok (woken for the export before its delete)"})
	return true
}

// exportBudget bounds the export step: its own deadline, not cut per
// attempt by ActionTimeout.
func (d *deleteRun) exportBudget() budget {
	return budget{provider: d.acct.Provider, limit: d.s.cfg.ExportBudget, own: true}
}

// export captures a new export under its own record (listed with the
// workspace's exports), retrying what the agent-server says is worth
// retrying.
func (d *deleteRun) export(ctx context.Context) bool {
	s, j := d.s, d.j
	store := s.exportStore()
	now := s.now()
	rec := newExportRecord(d.ws, now)
	if err := store.PutExport(ctx, rec); err != nil {
		d.block(ctx, fmt.Sprintf("could not record the export (%s); nothing was deleted: delete again", messageOf(err)), err)
		return false
	}
	j.ExportID, j.Verified, j.ExportSHA256, j.Note = rec.ID, false, "", ""
	if !d.step(ctx, StepExport) {
		return false
	}
	s.audit(ctx, AuditEntry{Owner: d.ws.Owner, Actor: j.Actor, Action: AuditExport, WorkspaceID: d.ws.ID,
		AccountID: d.ws.AccountID, Provider: d.ws.Provider, Outcome: "started"})
	s.log.Info("delete: export started", "workspace", d.ws.ID, "export", rec.ID)
	prog := s.newProgress(ctx, d.ws)
	var res ExportResult
	err := s.retry(ctx, d.op, d.exportBudget(), StepExport, func(ctx context.Context) error {
		ep, err := s.boxEndpoint(ctx, d.ws, d.acct, d.p, d.info)
		if err != nil {
			return fmt.Errorf("reach the box's agent-server: %w", err)
		}
		// Everything a person's export holds, the git delta included.
		res, err = s.cfg.Exporter.Export(ctx, exportJob(rec.ID, d.ws, d.acct, d.p, ep, true),
			func(pr ExportProgress) {
				prog.report(fmt.Sprintf("export before delete: %s, %d bytes", pr.Step, pr.Bytes))
			})
		return err
	})
	prog.stop()
	sctx := context.WithoutCancel(ctx)
	if cur, ok := s.feed.Get(d.ws.ID); ok && cur.Progress != "" {
		cur.Progress = ""
		if saved, serr := s.feed.Save(sctx, cur); serr == nil {
			d.ws = saved
		}
	}
	if ctx.Err() != nil {
		// Shutting down: the record stays running and is failed at the
		// next start, which re-does the export.
		s.log.Info("action interrupted; it resumes at next start", "workspace", d.ws.ID, "action", OpDelete, "step", StepExport)
		return false
	}
	rec.UpdatedAt = s.now()
	if err != nil {
		rec.State, rec.Error = ExportFailed, messageOf(err)
	} else {
		rec.State, rec.Verified = ExportVerified, true
		rec.Dir, rec.Files, rec.Bytes, rec.ArchiveSHA256 = res.Dir, res.Files, res.Bytes, res.ArchiveSHA256
	}
	if perr := store.PutExport(sctx, rec); perr != nil {
		d.block(ctx, fmt.Sprintf("could not record the export's outcome (%s); nothing was deleted: delete again", messageOf(perr)), perr)
		return false
	}
	s.observer().Exported(rec)
	s.audit(sctx, AuditEntry{Owner: d.ws.Owner, Actor: j.Actor, Action: AuditExport, WorkspaceID: d.ws.ID,
		AccountID: d.ws.AccountID, Provider: d.ws.Provider, Outcome: outcomeOf(err), ExportSHA256: rec.ArchiveSHA256})
	if err != nil {
		return d.exportFailed(ctx, "the export failed: "+messageOf(err), err)
	}
	if res.NothingToArchive {
		j.Note = "the agent-server had nothing to archive; the export holds the conversations' trajectories"
	}
	return true
}

// verify checks the journal's export before the box may go: its record
// must say verified and, when the exporter can, its files are hashed
// again. redo reports a record a crash left unverified (the export
// should be made again).
func (d *deleteRun) verify(ctx context.Context) (ok, redo bool) {
	s, j := d.s, d.j
	if !d.step(ctx, StepVerify) {
		return false, false
	}
	store := s.exportStore()
	if store == nil || j.ExportID == "" {
		return false, true
	}
	rec, err := store.GetExport(ctx, j.ExportID)
	if err != nil && !IsKind(err, KindNotFound) {
		d.block(ctx, fmt.Sprintf("could not read export %s (%s); nothing was deleted: delete again", j.ExportID, messageOf(err)), err)
		return false, false
	}
	if err != nil || rec.State != ExportVerified {
		return false, true
	}
	if v, ok := s.cfg.Exporter.(ExportVerifier); ok {
		if err := v.VerifyExport(ctx, rec.Dir); err != nil {
			if ctx.Err() != nil {
				return false, false
			}
			rec.State, rec.Verified, rec.Error, rec.UpdatedAt = ExportFailed, false, "read back before the delete: "+messageOf(err), s.now()
			if perr := store.PutExport(context.WithoutCancel(ctx), rec); perr != nil {
				s.log.Error("could not mark a corrupt export failed", "export", rec.ID, "err", perr)
			}
			return d.exportFailed(ctx, fmt.Sprintf("export %s does not read back as written (%s)", rec.ID, messageOf(err)), err), false
		}
	}
	j.Verified, j.ExportSHA256 = true, rec.ArchiveSHA256
	return true, false
}

// exportFailed applies the account's mode to a failed export: best-effort
// records why and goes on; required blocks. It reports whether the
// pipeline goes on.
func (d *deleteRun) exportFailed(ctx context.Context, why string, cause error) bool {
	if ctx.Err() != nil {
		return false
	}
	if d.j.Mode == DeleteExportBestEffort {
		d.j.NoExport = "best-effort export: " + why
		d.j.Verified = false
		d.s.log.Warn("delete: the export failed; deleting anyway (the account's delete_export is best_effort)", "workspace", d.ws.ID, "err", why)
		return true
	}
	d.block(ctx, why+"; nothing was deleted. Fix the cause and delete again, or set the account's delete_export to best_effort to delete without a verified export", cause)
	return false
}

// providerDelete deletes the box; a missing box counts as deleted.
func (d *deleteRun) providerDelete(ctx context.Context) bool {
	s := d.s
	err := s.retry(ctx, d.op, s.budgetFor(d.acct, d.p), StepProviderDelete, func(ctx context.Context) error {
		err := d.p.Delete(ctx, d.acct, d.ws.BoxID)
		if IsKind(err, KindNotFound) {
			return nil
		}
		return err
	})
	if err == nil {
		return true
	}
	d.fail(ctx, "delete failed, the box still exists: "+messageOf(err), err)
	return false
}

// fail ends the run with the box's real state and an error.
func (d *deleteRun) fail(ctx context.Context, msg string, cause error) {
	if ctx.Err() != nil {
		d.s.log.Info("action interrupted; it resumes at next start", "workspace", d.ws.ID, "action", OpDelete, "step", d.op.Step)
		return
	}
	ws := d.real(ctx)
	ws.Error = msg
	d.s.finish(ctx, *d.op, ws, cause)
}

// block ends the run before the provider delete: the box stays, the
// workspace shows its real state and why, the audit entry says
// "blocked: …". A box the pipeline woke is paused again first
// (repauseAndBlock).
func (d *deleteRun) block(ctx context.Context, why string, cause error) {
	if ctx.Err() != nil {
		d.s.log.Info("action interrupted; it resumes at next start", "workspace", d.ws.ID, "action", OpDelete, "step", d.op.Step)
		return
	}
	if d.j.Woke && d.op.Step != StepRepause {
		d.repauseAndBlock(ctx, why, cause)
		return
	}
	ws := d.real(ctx)
	ws.Error = "delete blocked: " + why
	if cause == nil {
		cause = errors.New(ws.Error)
	}
	d.s.finishAudited(ctx, *d.op, ws, &Error{Kind: KindConflict, Message: ws.Error, Err: cause}, "blocked: "+why, "")
}

// real is the workspace with its box's state as the provider reports it
// now (unknown when it cannot be read).
func (d *deleteRun) real(ctx context.Context) Workspace {
	ws := d.ws
	if ws.BoxID == "" {
		ws.State = StateError
		return ws
	}
	cur, err := d.s.reread(context.WithoutCancel(ctx), ws, d.acct, d.p)
	switch {
	case err == nil:
		return cur
	case IsKind(err, KindNotFound):
		ws.State = StateDeleted
	default:
		ws.State = StateUnknown
	}
	return ws
}
