package core

import (
	"context"
	"fmt"
	"time"
)

// RetentionConfig configures RunRetention.
type RetentionConfig struct {
	// Interval between ticks; 0 means one minute.
	Interval time.Duration
	// Lease is how long a claim keeps other processes off a workspace;
	// 0 means 15 minutes (longer than an action's budget).
	Lease time.Duration
	// Batch bounds the workspaces one tick handles per account (for each
	// of warnings and deletes); 0 means 100. The rest wait for the next.
	Batch int
	// AfterTick, if set, is called after each tick with what it did,
	// once the loop has armed its wait for the next one.
	AfterTick func(RetentionTickReport)
}

// RetentionTickReport is what one tick did.
type RetentionTickReport struct {
	Warned, Started, Skipped, BackedOff int
	// ExportsExpired counts the exports whose files were removed;
	// ExportsKept those due but kept (export_expiry.go); ExportErrors the
	// removals that failed (tried again next tick).
	ExportsExpired, ExportsKept, ExportErrors int
	Err                                       error
}

// sweepSlice is how many warnings one tick looks at for staleness.
const sweepSlice = 200

// RunRetention runs the retention tick every Interval until ctx ends. It
// first brings delete_after up to date on every workspace (a policy or
// the mode may have changed while companion was down). Without
// Config.ScheduledDeletion (the desktop) ticks do nothing: no timer ever
// deletes anything there, whatever the policies say.
func (s *Service) RunRetention(ctx context.Context, cfg RetentionConfig) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	s.ret.statMu.Lock()
	s.ret.interval = cfg.Interval
	s.ret.statMu.Unlock()
	if err := s.feed.rederive(ctx, ""); err != nil && ctx.Err() == nil {
		s.log.Error("retention: could not bring delete_after up to date", "err", err)
	}
	if !s.cfg.ScheduledDeletion {
		s.log.Info("retention policies are not enforced in desktop mode: no timer deletes anything")
	}
	for {
		rep := s.RetentionTick(ctx, cfg)
		if rep.Err != nil && ctx.Err() == nil {
			s.log.Warn("retention tick failed; next tick retries", "err", rep.Err)
		}
		t := s.cfg.Clock.NewTimer(cfg.Interval)
		if cfg.AfterTick != nil {
			cfg.AfterTick(rep)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// RetentionTick runs one tick: warn the owners of workspaces that entered
// their warning window, then claim and delete the due ones, then remove
// the exports past their policy's ExportsKeptFor. Exported for
// tests and benchmarks; RunRetention calls it on its timer.
func (s *Service) RetentionTick(ctx context.Context, cfg RetentionConfig) RetentionTickReport {
	r := s.ret
	now := s.now()
	r.statMu.Lock()
	r.ticks++
	r.lastTick = now
	r.statMu.Unlock()
	var rep RetentionTickReport
	if !s.cfg.ScheduledDeletion || r.store == nil {
		return rep
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 15 * time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	next, err := r.store.SweepRetention(ctx, r.sweepFrom, sweepSlice)
	if err != nil {
		rep.Err = err
		return rep
	}
	r.sweepFrom = next
	if s.shared() {
		// Another replica may have changed a policy since: read them
		// again, and bring delete_after up to date where it changed.
		if err := s.reloadPolicies(ctx); err != nil {
			rep.Err = err
			return rep
		}
	}
	for _, p := range r.enabled() {
		if err := s.warnSoon(ctx, p, now, cfg.Batch, &rep); err != nil {
			rep.Err = err
			return rep
		}
		due, err := r.store.RetentionDue(ctx, p.AccountID, now, cfg.Batch)
		if err != nil {
			rep.Err = err
			return rep
		}
		for _, c := range due {
			if ctx.Err() != nil {
				return rep
			}
			s.retainOne(ctx, c, now, cfg.Lease, &rep)
		}
	}
	var protected *exportProtection // read once per tick, when first needed
	for _, p := range r.where(RetentionPolicy.exportsDue) {
		if err := s.expireExports(ctx, p, now, &protected, &rep); err != nil {
			rep.Err = err
			return rep
		}
	}
	return rep
}

// warnSoon sends a retention_warning notice, once per workspace and
// delete_after, for each workspace of p's account within p.WarnBefore of
// its delete. A workspace already due is warned first, in the same tick.
func (s *Service) warnSoon(ctx context.Context, p RetentionPolicy, now time.Time, limit int, rep *RetentionTickReport) error {
	list, err := s.ret.store.RetentionUnwarned(ctx, p.AccountID, now.Add(p.WarnBefore), limit)
	if err != nil {
		return err
	}
	for _, c := range list {
		ws, ok, err := s.fresh(ctx, c.WorkspaceID)
		if err != nil {
			return err
		}
		if !ok || !ws.DeleteAfter.Equal(c.DeleteAfter) {
			continue // changed since the query
		}
		if !s.deriveRetention(ws).DeleteAfter.Equal(ws.DeleteAfter) {
			continue // saved under another policy: the due pass puts it right
		}
		// The notification is stored before the warning is marked sent: a
		// crash in between warns again under the same event id, which
		// the outbox keeps once, rather than never.
		if err := s.emit(ctx, Event{ID: EventID(EventRetentionWarning, ws.ID, ws.DeleteAfter.UTC().Format(time.RFC3339Nano)),
			Kind: EventRetentionWarning, Owner: ws.Owner, AccountID: ws.AccountID, WorkspaceID: ws.ID, WorkspaceName: ws.Name,
			Provider: ws.Provider, DeleteAfter: ws.DeleteAfter}); err != nil {
			return err
		}
		if first, err := s.markWarned(ctx, ws); err != nil {
			return err
		} else if !first {
			continue // another replica warned at the same moment
		}
		n := Notice{Kind: NoticeRetentionWarning, Owner: ws.Owner, WorkspaceID: ws.ID, DeleteAfter: ws.DeleteAfter}
		s.ret.publish(n)
		s.relay(Relayed{Kind: RelayNotice, Notice: n})
		s.audit(ctx, AuditEntry{Owner: ws.Owner, Actor: ActorRetention, Action: AuditRetentionWarn, WorkspaceID: ws.ID,
			AccountID: ws.AccountID, Provider: ws.Provider, Outcome: "warned: deleted after " + ws.DeleteAfter.Format(time.RFC3339)})
		rep.Warned++
	}
	return nil
}

// retentionBackoff is how long a workspace whose scheduled delete did not
// remove it waits before the next try: 1 minute, doubling, at most a day.
func retentionBackoff(attempts int) time.Duration {
	return min(time.Minute<<min(max(attempts-1, 0), 11), 24*time.Hour)
}

// retainOne claims one due workspace, re-checks it under its lock and
// starts its delete, the same journaled delete a person's confirmed
// preview starts.
func (s *Service) retainOne(ctx context.Context, c RetentionCandidate, now time.Time, lease time.Duration, rep *RetentionTickReport) {
	r := s.ret
	claim, ok, err := r.store.ClaimRetention(ctx, c.WorkspaceID, r.holder, now, lease)
	if err != nil {
		rep.Err = err
		return
	}
	if !ok {
		rep.Skipped++ // another process holds it
		return
	}
	ws, found, err := s.fresh(ctx, c.WorkspaceID)
	if err != nil {
		rep.Err = err
		s.releaseClaim(ctx, claim)
		return
	}
	if !found {
		s.dropClaim(ctx, c.WorkspaceID)
		return
	}
	if claim.Launched {
		// The delete started under this claim ended without removing the
		// workspace (blocked or failed): back off before the next one.
		s.backOff(ctx, ws, claim, now, fmt.Sprintf("the delete started earlier did not remove the workspace (%s)", orNone(ws.Error)), rep)
		return
	}
	unlock, ok := s.locks.tryLock(ws.ID)
	if !ok {
		// An action runs on it (a resume, say): let go, look again later.
		s.releaseClaim(ctx, claim)
		rep.Skipped++
		return
	}
	launched := false
	defer func() {
		if !launched {
			unlock()
		}
	}()
	ws, acct, reason, err := s.recheckDue(ctx, ws, now)
	if err != nil {
		s.backOff(ctx, ws, claim, now, "could not re-check the workspace: "+messageOf(err), rep)
		return
	}
	if reason != "" {
		s.dropClaim(ctx, ws.ID)
		s.audit(ctx, AuditEntry{Owner: ws.Owner, Actor: ActorRetention, Action: AuditRetentionSkip, WorkspaceID: ws.ID,
			AccountID: ws.AccountID, Provider: ws.Provider, Outcome: "skipped: " + reason})
		s.log.Info("retention skipped a workspace", "workspace", ws.ID, "reason", reason)
		rep.Skipped++
		return
	}
	claim.Launched, claim.Attempts, claim.NotBefore = true, claim.Attempts+1, now
	if err := r.store.SaveRetentionClaim(ctx, r.holder, claim); err != nil {
		rep.Err = err
		return
	}
	if _, err := s.launch(WithActor(ctx, ActorRetention), ws, acct, OpDelete, StateDeleting, unlock); err != nil {
		s.backOff(ctx, ws, claim, now, "could not start the delete: "+messageOf(err), rep)
		return
	}
	launched = true
	s.log.Info("retention started a delete", "workspace", ws.ID, "delete_after", ws.DeleteAfter, "attempt", claim.Attempts)
	rep.Started++
}

// recheckDue re-reads a claimed workspace under its lock, from companion's
// records and then from the provider, and says why it must not be deleted
// now ("" when it must). The caller holds the workspace's lock.
func (s *Service) recheckDue(ctx context.Context, ws Workspace, now time.Time) (Workspace, Account, string, error) {
	ws, ok, err := s.fresh(ctx, ws.ID)
	switch {
	case err != nil:
		return ws, Account{}, "", err
	case !ok:
		return ws, Account{}, "it is gone", nil
	case ws.Keep:
		return ws, Account{}, "the workspace is kept", nil
	case ws.DeleteAfter.IsZero():
		return ws, Account{}, "it is no longer scheduled (" + s.unscheduledReason(ws) + ")", nil
	case ws.DeleteAfter.After(now):
		return ws, Account{}, "it is not due until " + ws.DeleteAfter.Format(time.RFC3339), nil
	}
	// delete_after was derived by whichever process saved the workspace
	// last, from the policy it held then. Only the policy in force now
	// (on a shared store: read from it) may make it due.
	if s.shared() {
		changed, err := s.refreshPolicy(ctx, ws.AccountID)
		if err != nil {
			return ws, Account{}, "", err
		}
		if changed {
			s.rederiveLater(ws.AccountID)
		}
	}
	if want := s.deriveRetention(ws).DeleteAfter; want.IsZero() || want.After(now) {
		reason := "the account's retention policy no longer schedules it"
		if !want.IsZero() {
			reason = "under the policy in force it is not due until " + want.Format(time.RFC3339)
		}
		// Put the schedule right (the save derives it), under the lock
		// the caller holds.
		if _, err := s.feed.Save(ctx, ws); err != nil {
			return ws, Account{}, "", err
		}
		return ws, Account{}, reason, nil
	}
	acct, err := s.cfg.Store.GetAccount(ctx, ws.AccountID)
	if err != nil {
		return ws, Account{}, "", err
	}
	p, info, err := s.provider(ctx, acct)
	if err != nil {
		return ws, acct, "", err
	}
	if !info.Capabilities.Delete {
		// Not a skip: it would be due again next tick. Back off instead.
		return ws, acct, "", Errorf(KindInvalid, "provider %s cannot delete boxes", info.Name)
	}
	// The provider has the last word: a box resumed outside companion (or
	// by a person a moment ago) is running there even if no pass saw it.
	before := ws.PausedAt
	if ws, err = s.refresh(ctx, ws, acct, p); err != nil {
		return ws, acct, "", err
	}
	switch {
	case ws.State == StateDeleted:
		return ws, acct, "its box is already gone at the provider", nil
	case !ws.PausedForRetention():
		return ws, acct, "it was resumed: it is " + string(ws.State), nil
	case !ws.PausedAt.Equal(before):
		return ws, acct, "it was resumed and paused again since", nil
	}
	return ws, acct, "", nil
}

func (s *Service) backOff(ctx context.Context, ws Workspace, claim RetentionClaim, now time.Time, why string, rep *RetentionTickReport) {
	asHolder := claim.Holder
	wait := retentionBackoff(max(claim.Attempts, 1))
	claim.Launched, claim.Holder, claim.LeaseUntil = false, "", time.Time{}
	claim.NotBefore, claim.LastError = now.Add(wait), why
	if err := s.ret.store.SaveRetentionClaim(ctx, asHolder, claim); err != nil {
		rep.Err = err
		return
	}
	s.audit(ctx, AuditEntry{Owner: ws.Owner, Actor: ActorRetention, Action: AuditRetentionBackoff, WorkspaceID: ws.ID,
		AccountID: ws.AccountID, Provider: ws.Provider,
		Outcome: fmt.Sprintf("failed: %s; next try after %s", why, claim.NotBefore.Format(time.RFC3339))})
	s.log.Warn("retention backs off a workspace", "workspace", ws.ID, "reason", why, "next_try", claim.NotBefore)
	rep.BackedOff++
}

func (s *Service) releaseClaim(ctx context.Context, claim RetentionClaim) {
	asHolder := claim.Holder
	claim.Holder, claim.LeaseUntil = "", time.Time{}
	if err := s.ret.store.SaveRetentionClaim(ctx, asHolder, claim); err != nil {
		s.log.Warn("retention: could not release a claim; its lease runs out", "workspace", claim.WorkspaceID, "err", err)
	}
}

func (s *Service) dropClaim(ctx context.Context, id string) {
	if err := s.ret.store.DropRetentionClaim(ctx, id); err != nil {
		s.log.Warn("retention: could not drop a claim; it is swept later", "workspace", id, "err", err)
	}
}

func orNone(s string) string {
	if s == "" {
		return "no error was recorded"
	}
	return s
}
