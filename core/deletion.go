package core

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// What a provider's deletion clocks (clocks.go) mean for one workspace,
// derived on every save (feed.derive): the clock that deletes it first,
// when, and whether it runs with no verified export made since the box
// last changed (AtRisk). A clock has started when the box is paused or
// stopped: a running box is in use, and a paused one is what reapers,
// auto-deletes and expiries take.

// coverSlack is how long before a pause an export may have been verified
// and still count as covering the paused box: companion's own pause (and
// the serve guard) exports and then pauses at once.
const coverSlack = 2 * time.Minute

// clockCache keeps each provider's declared clocks, learnt from its
// adapter's Describe (derive runs under the feed's lock and must not call
// an adapter). A provider not described yet is unknown: derive then keeps
// the fields a workspace has.
type clockCache struct {
	mu sync.Mutex
	m  map[string][]DeletionClock
}

func (c *clockCache) get(provider string) ([]DeletionClock, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.m[provider]
	return cl, ok
}

// learn records a provider's clocks and reports whether they changed.
func (c *clockCache) learn(provider string, clocks []DeletionClock) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][]DeletionClock{}
	}
	old, ok := c.m[provider]
	if ok && slices.Equal(old, clocks) {
		return false
	}
	c.m[provider] = slices.Clone(clocks)
	return true
}

// learnClocks is called with every description of a provider: when its
// clocks are new or changed, every workspace's derived fields are brought
// up to date in the background.
func (s *Service) learnClocks(info ProviderInfo) {
	if !s.clocks.learn(info.Name, info.Clocks) {
		return
	}
	s.goBackground(func(ctx context.Context) {
		if err := s.feed.rederive(ctx, ""); err != nil && ctx.Err() == nil {
			s.log.Warn("could not bring deletion risks up to date", "provider", info.Name, "err", err)
		}
	})
}

// deriveDeletion fills ws's deletion fields from its provider's clocks.
func (s *Service) deriveDeletion(ws Workspace) Workspace {
	clocks, known := s.clocks.get(ws.Provider)
	if !known {
		return ws
	}
	ws.DeletionClock, ws.DeletionDueAt, ws.AtRisk, ws.ExportBy = "", time.Time{}, false, time.Time{}
	running := ws.State == StateRunning
	if ws.Removed || ws.BoxID == "" || (!running && ws.State != StatePaused && ws.State != StateStopped) {
		return ws
	}
	var first *DeletionClock
	var firstStart, firstDue time.Time
	for _, c := range EffectiveClocks(ProviderInfo{Clocks: clocks}, ws) {
		// A running clock runs while the box runs; the others once it
		// is paused or stopped.
		if (c.Starts == ClockStartsRunning) != running {
			continue
		}
		start, due := clockStart(c, ws), time.Time{}
		switch {
		case start.IsZero() && c.Starts == ClockStartsRunning && c.After > 0:
			// A box made at an unknown time, not before its workspace:
			// timed from the workspace, the clock ends no later.
			start = ws.CreatedAt
			due = start.Add(c.After).UTC()
		case start.IsZero():
			// A box that stopped when nobody saw: the clock runs, from
			// an unknown time.
			start = ws.CreatedAt
		case c.After > 0:
			due = start.Add(c.After).UTC()
		}
		// A clock whose time is not published may strike any time: it
		// comes first.
		if first == nil || (!firstDue.IsZero() && (due.IsZero() || due.Before(firstDue))) {
			c := c
			first, firstStart, firstDue = &c, start, due
		}
	}
	if first == nil {
		return ws
	}
	ws.DeletionClock, ws.DeletionDueAt = first.Name, firstDue
	// No export holds a running box: it changes as it runs.
	ws.AtRisk = running || !covered(ws)
	if ws.AtRisk && s.cfg.ScheduledDeletion {
		ws.ExportBy = exportBy(firstStart, firstDue, s.guardMargin())
	}
	return ws
}

// clockStart is when c started for ws (zero: not started).
func clockStart(c DeletionClock, ws Workspace) time.Time {
	switch c.Starts {
	case ClockStartsRunning:
		return ws.BoxCreatedAt
	case ClockStartsIdle:
		if !ws.LastActivityAt.IsZero() {
			return ws.LastActivityAt
		}
		return ws.PausedAt
	default:
		return ws.PausedAt
	}
}

// covered reports whether ws's newest verified export holds the paused
// box as it is: verified at most coverSlack before it paused (companion
// exported, then paused), or after its last activity (nothing changed
// since; an export's own requests count as activity at some providers,
// and they end before it is verified).
func covered(ws Workspace) bool {
	switch {
	case ws.LastExportAt.IsZero():
		return false
	case !ws.PausedAt.IsZero() && !ws.LastExportAt.Before(ws.PausedAt.Add(-coverSlack)):
		return true
	}
	return !ws.LastActivityAt.IsZero() && !ws.LastExportAt.Before(ws.LastActivityAt)
}

// vanishedError is the workspace's error when its box is gone without
// companion: what survives, or that nothing does.
func vanishedError(ws Workspace) string {
	msg := fmt.Sprintf("box %s was deleted at %s outside companion", ws.BoxID, ws.Provider)
	if ws.DeletionClock != "" {
		msg += fmt.Sprintf(" (its %s clock)", ws.DeletionClock)
	}
	if ws.LastExportID == "" {
		return msg + "; no verified export of it was made, so its files are lost"
	}
	return msg + fmt.Sprintf("; its newest verified export is %s, made %s: it can be downloaded and restored",
		ws.LastExportID, ws.LastExportAt.UTC().Format(time.RFC3339))
}

// noteExport records a verified export on its workspace (under the
// workspace's lock, held by the action that made it).
func (s *Service) noteExport(ctx context.Context, rec ExportRecord) {
	if !rec.Verified {
		return
	}
	cur, ok := s.feed.Get(rec.WorkspaceID)
	if !ok || !cur.LastExportAt.Before(rec.UpdatedAt) {
		return
	}
	cur.LastExportAt, cur.LastExportID = rec.UpdatedAt.UTC(), rec.ID
	if _, err := s.feed.Save(context.WithoutCancel(ctx), cur); err != nil {
		s.log.Warn("could not record the workspace's newest export", "workspace", rec.WorkspaceID, "export", rec.ID, "err", err)
	}
}

// derive fills every derived field of a workspace before it is saved.
func (s *Service) derive(ws Workspace) Workspace {
	return s.deriveDeletion(s.deriveRetention(ws))
}

// derivedChanged says whether derive would change what ws has.
func derivedChanged(a, b Workspace) bool {
	return !a.DeleteAfter.Equal(b.DeleteAfter) || a.DeletionClock != b.DeletionClock ||
		!a.DeletionDueAt.Equal(b.DeletionDueAt) || a.AtRisk != b.AtRisk || !a.ExportBy.Equal(b.ExportBy)
}

// afterSave is told of every save: it audits retention's schedule and a
// box that vanished without companion.
func (s *Service) afterSave(before, after Workspace) {
	s.retentionSaved(before, after)
	if after.State == StateDeleted && !after.Removed && before.State != StateDeleted && before.ID != "" {
		s.audit(context.Background(), AuditEntry{Owner: after.Owner, Actor: "provider:" + after.Provider, Action: AuditVanished,
			WorkspaceID: after.ID, AccountID: after.AccountID, Provider: after.Provider, Outcome: after.Error})
	}
}

// AuditVanished is the audit action of a box deleted outside companion.
const AuditVanished = "vanished"

// exportBeforePause exports a guarded workspace before companion pauses
// it: its provider's clock starts at the pause (or has been running
// since its last activity) and deletes without companion. A workspace
// whose newest export already holds it as it is needs none. It reports
// whether the pause goes on; when not, it has finished the action with
// the box running and the reason.
func (s *Service) exportBeforePause(ctx context.Context, op *Op, ws *Workspace, acct Account, p Provider, info ProviderInfo) bool {
	clocks := EffectiveClocks(info, *ws)
	if len(clocks) == 0 || covered(*ws) {
		return true
	}
	blocked := func(why string, cause error) bool {
		if acct.DeleteExport.Effective() == DeleteExportBestEffort {
			// The account chose to lose work rather than be held up by
			// a failing export, for deletes; a clock's delete is one.
			s.log.Warn("pause goes ahead without an export: the account's delete_export is best_effort",
				"workspace", ws.ID, "clock", clocks[0].Name, "why", why)
			return true
		}
		cur := *ws
		if r, err := s.reread(ctx, cur, acct, p); err == nil {
			cur = r
		}
		cur.Error = fmt.Sprintf("pause blocked: %s; the box keeps running (and billing) so that %s's %s cannot delete work no export holds. Fix the cause and pause again, or set the account's delete_export to best_effort to pause without an export",
			why, ws.Provider, describeClock(clocks[0]))
		s.finish(ctx, *op, cur, &Error{Kind: KindConflict, Message: cur.Error, Err: cause})
		return false
	}
	store := s.exportStore()
	if s.cfg.Exporter == nil || store == nil {
		return blocked("exports are not configured in this companion, and this workspace is only paused after a verified export", nil)
	}
	now := s.now()
	rec := newExportRecord(*ws, now)
	if err := store.PutExport(ctx, rec); err != nil {
		return blocked("could not record the export before the pause: "+messageOf(err), err)
	}
	actor := s.actorOf(op.ID)
	s.audit(ctx, AuditEntry{Owner: ws.Owner, Actor: actor, Action: AuditExport, WorkspaceID: ws.ID,
		AccountID: ws.AccountID, Provider: ws.Provider, Outcome: "started (before a pause)"})
	s.log.Info("pause: export first", "workspace", ws.ID, "export", rec.ID, "clock", clocks[0].Name)
	_, w, err := s.exportWith(ctx, op, rec, *ws, acct, p, info, ExportOptions{GitDelta: true}, actor)
	if ctx.Err() != nil {
		return false // resumes at the next start
	}
	if err != nil {
		return blocked("the export before the pause failed: "+messageOf(err), err)
	}
	*ws = w
	return true
}

// describeClock words a clock for people.
func describeClock(c DeletionClock) string {
	when := "after a time it does not publish"
	if c.After > 0 {
		when = "after " + c.After.String()
	}
	start := "once the box is paused"
	switch c.Starts {
	case ClockStartsIdle:
		start = "once the box has been idle"
	case ClockStartsRunning:
		start = "once the box started running"
	}
	return fmt.Sprintf("%s clock (it deletes the %s %s %s)", c.Name, c.Loses, when, start)
}
