package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// runOp drives a journaled action to its end. Each branch re-reads or
// re-does idempotent provider calls, so running an op again after a crash
// (from Recover) is the same as running it the first time. The caller
// holds the workspace's lock.
func (s *Service) runOp(ctx context.Context, op Op, ws Workspace, acct Account) {
	p, info, err := s.provider(ctx, acct)
	if err != nil {
		// Without its adapter nothing is known about the box; say so
		// rather than leave the workspace in a transitional state.
		ws.State, ws.Error = StateUnknown, string(op.Kind)+" failed: "+messageOf(err)
		s.finish(ctx, op, ws, err)
		return
	}
	switch op.Kind {
	case OpCreate:
		s.runCreate(ctx, op, ws, acct, p, info)
	case OpPause, OpResume:
		s.runSuspendResume(ctx, op, ws, acct, p, info)
	case OpDelete:
		s.runDeletePipeline(ctx, op, ws, acct, p, info)
	case OpRestore:
		s.runRestore(ctx, op, ws, acct, p, info)
	default:
		ws.State, ws.Error = StateUnknown, fmt.Sprintf("unknown journaled action %q", op.Kind)
		s.finish(ctx, op, ws, fmt.Errorf("unknown journaled action %q", op.Kind))
	}
}

// opState is the transitional state an action holds its workspace in while
// it runs. A journal entry whose workspace is in another state is stale
// (the action finished but its entry was not removed) and is not re-run.
func opState(k OpKind) State {
	switch k {
	case OpCreate, OpRestore:
		return StateCreating
	case OpPause:
		return StatePausing
	case OpResume:
		return StateResuming
	case OpDelete:
		return StateDeleting
	}
	return ""
}

func (s *Service) runCreate(ctx context.Context, op Op, ws Workspace, acct Account, p Provider, info ProviderInfo) {
	spec := CreateSpec{WorkspaceID: ws.ID, Owner: ws.Owner, Name: ws.Name, Lifecycle: ws.Lifecycle, Options: ws.Options}
	key, err := s.agentKey(ctx, ws.ID)
	if err != nil {
		ws.Error, ws.State = "create failed: "+messageOf(err), StateError
		s.finish(ctx, op, ws, err)
		return
	}
	spec.AgentKey = key
	progress := s.newProgress(ctx, ws)
	spec.Progress = progress.report
	box, err := s.createBox(ctx, &op, acct, p, info, spec)
	progress.stop()
	if err != nil {
		if box.ID != "" {
			ws.BoxID, ws.BoxURL = box.ID, box.URL // so that delete finds it
		}
		ws.Error = "create failed: " + messageOf(err)
		ws.State = StateError
		s.finish(ctx, op, ws, err)
		return
	}
	ws = s.applyBox(ws, box)
	ws.Error = ""
	s.finish(ctx, op, ws, nil)
}

// createBox makes spec's box, or finds the one an earlier attempt made
// (after a crash or a lost response), and starts it if it was left
// stopped. The box it returns may be set even with an error.
func (s *Service) createBox(ctx context.Context, op *Op, acct Account, p Provider, info ProviderInfo, spec CreateSpec) (Box, error) {
	var box Box
	err := s.retry(ctx, op, s.budgetFor(acct, p), "provider_create", func(ctx context.Context) error {
		// After a crash or a lost response the box may already exist.
		if op.Attempts > 1 && info.Capabilities.List {
			if b, ok, err := findByLabel(ctx, p, acct, spec.WorkspaceID); err != nil {
				return err
			} else if ok {
				box = b
				return nil
			}
		}
		b, err := p.Create(ctx, acct, spec)
		if IsKind(err, KindConflict) && info.Capabilities.List {
			if found, ok, ferr := findByLabel(ctx, p, acct, spec.WorkspaceID); ferr == nil && ok {
				b, err = found, nil
			}
		}
		box = b
		return err
	})
	if err != nil {
		return box, err
	}
	return s.startFoundBox(ctx, op, box, acct, p, info)
}

func (s *Service) runSuspendResume(ctx context.Context, op Op, ws Workspace, acct Account, p Provider, info ProviderInfo) {
	verb, call := "pause", p.Suspend
	if op.Kind == OpResume {
		verb, call = "resume", p.Resume
	} else if !s.exportBeforePause(ctx, &op, &ws, acct, p, info) {
		return
	}
	var box Box
	err := s.retry(ctx, &op, s.budgetFor(acct, p), "provider_"+verb, func(ctx context.Context) error {
		b, err := call(ctx, acct, ws.BoxID)
		if IsKind(err, KindNotFound) && op.Kind == OpResume && !info.Capabilities.ResumeSameIdentity && info.Capabilities.List {
			// A snapshot-and-restore provider may already have replaced the
			// box; follow the workspace label to the new one.
			if found, ok, ferr := findByLabel(ctx, p, acct, ws.ID); ferr == nil && ok {
				b, err = found, nil
			}
		}
		box = b
		return err
	})
	if err != nil {
		ws.Error = verb + " failed: " + messageOf(err)
		if IsKind(err, KindNotFound) {
			ws.State = StateDeleted
		} else if cur, rerr := s.reread(ctx, ws, acct, p); rerr == nil {
			ws.State = cur.State
		} else {
			ws.State = StateUnknown
		}
		s.finish(ctx, op, ws, err)
		return
	}
	if box.ID != "" && box.ID != ws.BoxID {
		s.log.Info("box identity changed on resume", "workspace", ws.ID, "old_box", ws.BoxID, "new_box", box.ID)
	}
	ws = s.applyBox(ws, box)
	if op.Kind == OpPause && ws.State == StatePaused {
		ws.StopReason, ws.ExitCode = StopCompanion, nil
	}
	ws.Error = ""
	s.finish(ctx, op, ws, nil)
}

// reread returns the workspace updated from the provider, without saving.
func (s *Service) reread(ctx context.Context, ws Workspace, acct Account, p Provider) (Workspace, error) {
	if ws.BoxID == "" {
		return ws, errors.New("no box")
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	box, err := p.Get(cctx, acct, ws.BoxID)
	if err != nil {
		return ws, err
	}
	return s.applyBox(ws, box), nil
}

// finish records an action's outcome and closes its journal entry. If ctx
// ended (companion is shutting down) the entry stays, so the next start
// resumes the action.
func (s *Service) finish(ctx context.Context, op Op, ws Workspace, cause error) {
	s.finishAudited(ctx, op, ws, cause, outcomeOf(cause), "")
}

// finishAudited is finish with the audit entry's outcome and export hash
// chosen by the caller (the delete pipeline's "blocked: …", say).
func (s *Service) finishAudited(ctx context.Context, op Op, ws Workspace, cause error, outcome, exportSHA256 string) {
	if ctx.Err() != nil {
		s.log.Info("action interrupted; it resumes at next start", "workspace", ws.ID, "action", op.Kind, "step", op.Step)
		return
	}
	// The request's context may be gone; the outcome must still be saved.
	sctx := context.WithoutCancel(ctx)
	if _, err := s.feed.Save(sctx, ws); err != nil {
		s.log.Error("could not record action outcome; it resumes at next start", "workspace", ws.ID, "action", op.Kind, "err", err)
		return
	}
	s.emitDeleteOutcome(sctx, op, ws, cause, outcome)
	s.dropOp(op)
	// Providers rotate endpoints on start and stop: resolve again.
	s.agents.forget(ws.ID)
	if ws.Removed {
		s.forgetAgentKey(sctx, ws.ID)
	}
	s.audit(sctx, AuditEntry{Owner: ws.Owner, Actor: s.takeActor(op.ID), Action: opAudit(op.Kind), WorkspaceID: ws.ID,
		AccountID: ws.AccountID, Provider: ws.Provider, Outcome: outcome, ExportSHA256: exportSHA256})
	if cause != nil {
		s.log.Warn("workspace "+string(op.Kind)+" failed", "workspace", ws.ID, "err", messageOf(cause), "kind", KindOf(cause))
	} else {
		s.log.Info("workspace "+string(op.Kind)+" done", "workspace", ws.ID, "state", ws.State, "box", ws.BoxID)
	}
}

func (s *Service) dropOp(op Op) {
	if err := s.cfg.Store.DeleteOp(context.WithoutCancel(s.bg), op.ID); err != nil {
		s.log.Error("could not close journal entry", "op", op.ID, "err", err)
	}
}

// retry runs one journaled step, recording it before each attempt, and
// retries transient failures (rate limits, unavailability, timeouts) with
// backoff that honours Retry-After, up to MaxAttempts per action. Every
// attempt and wait shares one deadline, the action's budget (budgetFor):
// a call timeout is never multiplied by the number of retries.
func (s *Service) retry(ctx context.Context, op *Op, b budget, step string, f func(ctx context.Context) error) error {
	deadline := s.cfg.Clock.Now().Add(b.limit)
	bctx, cancel := s.timeout(ctx, b.limit)
	defer cancel()
	for tries := 1; ; tries++ {
		op.Step = step
		op.Attempts++
		op.UpdatedAt = s.now()
		if _, err := s.cfg.Store.PutOp(ctx, *op); err != nil {
			return fmt.Errorf("journal step %s: %w", step, err)
		}
		actx, acancel := s.attemptCtx(bctx, b)
		err := f(actx)
		acancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		op.LastError = messageOf(err)
		if bctx.Err() != nil && transient(err) {
			// The attempt was cut by the action's deadline (a definite
			// answer that arrived just then is reported as itself).
			return budgetError(b, step, tries, err, "")
		}
		if !transient(err) || op.Attempts >= s.cfg.MaxAttempts {
			return err
		}
		wait := backoff(op.Attempts, RetryAfterOf(err))
		if left := deadline.Sub(s.cfg.Clock.Now()); wait >= left {
			// Waiting would end past the deadline: say so now rather
			// than sleep until it passes.
			return budgetError(b, step, tries, err, fmt.Sprintf("(the next attempt was due in %s, %s left)", wait.Round(time.Millisecond), left.Round(time.Millisecond)))
		}
		s.log.Warn("provider call failed; retrying", "workspace", op.WorkspaceID, "step", step, "attempt", op.Attempts, "wait", wait, "err", op.LastError)
		if !sleep(ctx, s.cfg.Clock, wait) {
			return ctx.Err()
		}
	}
}

func transient(err error) bool {
	switch KindOf(err) {
	case KindRateLimited, KindUnavailable:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// backoff is exponential from 1 s, capped at 5 minutes, with ±20% jitter,
// and never shorter than what the provider asked for.
func backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := time.Second << min(attempt-1, 9)
	d = min(d, 5*time.Minute)
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	return max(d, retryAfter)
}

// findByLabel looks for the box labelled with a workspace id.
func findByLabel(ctx context.Context, p Provider, acct Account, workspaceID string) (Box, bool, error) {
	boxes, err := p.List(ctx, acct)
	if err != nil {
		return Box{}, false, err
	}
	for _, b := range boxes {
		if b.Labels[LabelWorkspace] == workspaceID && b.State != StateDeleted && b.State != StateDeleting {
			return b, true, nil
		}
	}
	return Box{}, false, nil
}

// applyBox copies what the provider reports about box onto ws.
func (s *Service) applyBox(ws Workspace, box Box) Workspace {
	if box.ID != "" {
		if box.ID != ws.BoxID {
			ws.BoxCreatedAt = time.Time{} // another box: its own time, if any
		}
		ws.BoxID = box.ID
	}
	if !box.CreatedAt.IsZero() {
		ws.BoxCreatedAt = box.CreatedAt.UTC()
	}
	ws.BoxURL = box.URL
	prevState, prevPausedAt := ws.State, ws.PausedAt
	ws.State = box.State
	if !ws.State.Valid() {
		ws.State = StateUnknown
	}
	ws = applyStop(ws, box, prevState, prevPausedAt)
	if ws.State == StatePaused {
		switch {
		case !box.PausedAt.IsZero():
			ws.PausedAt = box.PausedAt.UTC()
		case ws.PausedAt.IsZero():
			ws.PausedAt = s.now() // first seen paused
		}
	} else if ws.State != StatePausing {
		ws.PausedAt = time.Time{}
	}
	if !box.LastActivityAt.IsZero() {
		ws.LastActivityAt = box.LastActivityAt.UTC()
	}
	if box.Size != nil {
		sz := *box.Size
		sz.At = sz.At.UTC()
		ws.Size = &sz
	}
	return ws
}

// sizeRefresh is how old a size figure may get before an unchanged value is
// written again just to refresh its timestamp.
const sizeRefresh = 5 * time.Minute

// changed reports whether b differs from a in a way worth a feed revision.
// Small jitter (activity within tolerance, a same-size re-measurement) is
// not a change, so an idle reconcile pass publishes nothing.
func changed(a, b Workspace) bool {
	if a.State != b.State || a.BoxID != b.BoxID || a.BoxURL != b.BoxURL || a.Error != b.Error ||
		!a.PausedAt.Equal(b.PausedAt) || a.Removed != b.Removed || a.Name != b.Name ||
		a.StopReason != b.StopReason || !sameExit(a.ExitCode, b.ExitCode) || !a.BoxCreatedAt.Equal(b.BoxCreatedAt) {
		return true
	}
	if d := b.LastActivityAt.Sub(a.LastActivityAt); d > activityTolerance || d < -activityTolerance {
		return true
	}
	switch {
	case (a.Size == nil) != (b.Size == nil):
		return true
	case a.Size != nil && (a.Size.Bytes != b.Size.Bytes || a.Size.Source != b.Size.Source || b.Size.At.Sub(a.Size.At) > sizeRefresh):
		return true
	}
	return false
}

// Recover resumes every action a previous run left in the journal. Each
// runs in the background holding its workspace's lock. On a store shared
// by several replicas it claims entries instead (recoverShared), now and
// periodically, so that a replica that died is taken over.
func (s *Service) Recover(ctx context.Context) error {
	if s.rep.claims != nil && s.shared() {
		return s.recoverShared(ctx)
	}
	ops, err := s.cfg.Store.PendingOps(ctx)
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	newest := map[string]int64{} // the last journal entry of each workspace
	for _, op := range ops {
		newest[op.WorkspaceID] = max(newest[op.WorkspaceID], op.ID)
	}
	for _, op := range ops {
		ws, err := s.cfg.Store.GetWorkspace(ctx, op.WorkspaceID)
		if err != nil && !IsKind(err, KindNotFound) {
			return fmt.Errorf("read journal: %w", err)
		}
		if err != nil || ws.Removed || op.ID != newest[op.WorkspaceID] || ws.State != opState(op.Kind) {
			// Gone, superseded, or finished before its entry could be
			// closed: re-running it would act on a settled workspace.
			s.dropOp(op)
			continue
		}
		acct, err := s.cfg.Store.GetAccount(ctx, ws.AccountID)
		if err != nil {
			ws.State, ws.Error = StateError, "its account was removed before the "+string(op.Kind)+" finished"
			s.finish(ctx, op, ws, err)
			continue
		}
		unlock, ok := s.locks.tryLock(ws.ID)
		if !ok {
			continue
		}
		s.log.Info("resuming interrupted action", "workspace", ws.ID, "action", op.Kind, "step", op.Step, "attempts", op.Attempts)
		s.goBackground(func(ctx context.Context) {
			defer unlock()
			s.runOp(ctx, op, ws, acct)
		})
	}
	return nil
}

func sameExit(a, b *int) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
