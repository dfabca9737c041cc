package core

import (
	"context"
	"errors"
	"fmt"
)

// repauseAndBlock ends a blocked delete whose box the pipeline woke for
// the export: the person had it paused, so it is paused again rather
// than left running (billing, its idle clock moving). The block reason
// and StepRepause are journaled before the provider call, so a restart
// in between pauses it and blocks just the same. The pause is the same
// provider call as a person's pause, retried within the action's budget;
// a box already paused is not paused twice. The workspace's error and the
// audit entry keep the block reason and say how the re-pause went.
func (d *deleteRun) repauseAndBlock(ctx context.Context, why string, cause error) {
	s := d.s
	d.j.Blocked = why
	d.op.Step, d.op.Attempts, d.op.LastError, d.op.UpdatedAt = StepRepause, 0, "", s.now()
	var box Box
	pause := func(ctx context.Context) error {
		if cur, err := s.reread(ctx, d.ws, d.acct, d.p); err == nil && (cur.State == StatePaused || cur.State == StatePausing) {
			box = Box{ID: cur.BoxID, URL: cur.BoxURL, State: cur.State, PausedAt: cur.PausedAt}
			return nil
		}
		b, err := d.p.Suspend(ctx, d.acct, d.ws.BoxID)
		box = b
		return err
	}
	var err error
	if _, jerr := s.cfg.Store.PutOp(ctx, *d.op); jerr != nil {
		// The journal cannot be written (so retry could not record its
		// attempts either): pause once, unjournaled. A crash now leaves
		// the entry at its earlier step, which runs again and blocks again.
		s.log.Error("could not journal the re-pause of a blocked delete; pausing once", "workspace", d.ws.ID, "err", jerr)
		cctx, cancel := s.callCtx(ctx)
		err = pause(cctx)
		cancel()
	} else {
		if h := s.cfg.StepHook; h != nil {
			h(OpDelete, StepRepause)
		}
		err = s.retry(ctx, d.op, s.budgetFor(d.acct, d.p), StepRepause, pause)
	}
	if ctx.Err() != nil {
		s.log.Info("action interrupted; it resumes at next start", "workspace", d.ws.ID, "action", OpDelete, "step", StepRepause)
		return
	}
	var ws Workspace
	msg := why
	if err == nil && box.State.Valid() && box.State != "" {
		ws = s.applyBox(d.ws, box)
	} else {
		ws = d.real(ctx)
	}
	switch {
	case err == nil && (ws.State == StatePaused || ws.State == StatePausing):
		ws.StopReason, ws.ExitCode = StopCompanion, nil
		msg += "; the box was paused again"
		s.audit(context.WithoutCancel(ctx), AuditEntry{Owner: d.ws.Owner, Actor: d.j.Actor, Action: AuditPause, WorkspaceID: d.ws.ID,
			AccountID: d.ws.AccountID, Provider: d.ws.Provider, Outcome: "ok (paused again after its delete blocked)"})
	case err == nil:
		msg += fmt.Sprintf("; the box was woken for the export and is %s after pausing it again: if it runs it is billing, pause it yourself", ws.State)
	default:
		msg += fmt.Sprintf("; the box was woken for the export and could not be paused again (%s): it is running and billing, pause it yourself", messageOf(err))
		if cause == nil {
			cause = err
		}
	}
	ws.Error = "delete blocked: " + msg
	if cause == nil {
		cause = errors.New(ws.Error)
	}
	s.finishAudited(ctx, *d.op, ws, &Error{Kind: KindConflict, Message: ws.Error, Err: cause}, "blocked: "+msg, "")
}
