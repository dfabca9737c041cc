package core

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The guard (serve only): a workspace its provider paused on its own,
// with a deletion clock running and no export holding it (AtRisk), is
// exported before the clock runs out: woken if it must be, exported, and
// paused again. A running workspace whose box a running clock ends is
// paused (export first) instead. The desktop, which cannot promise to be running then,
// marks such workspaces at risk instead (the derived AtRisk and
// DeletionDueAt, on the stream).

// ActorGuard is who acts when the guard exports a workspace.
const ActorGuard = "guard"

const (
	// DefaultGuardInterval is how often RunGuard looks at at-risk
	// workspaces when not told.
	DefaultGuardInterval = time.Minute
	// DefaultGuardMargin is Config.GuardMargin's default.
	DefaultGuardMargin = time.Hour
	// guardBackoffMax bounds how long a workspace whose guard export
	// failed waits before the next try.
	guardBackoffMax = time.Hour
)

// guardState remembers failed guard exports, so a box whose export keeps
// failing is not woken every tick.
type guardState struct {
	mu      sync.Mutex
	retry   map[string]time.Time // workspace → not before
	backoff map[string]time.Duration
	running map[string]bool
}

// exportBy is when the guard exports a workspace at risk from a clock
// that started at start and deletes at due: margin before due, or at once
// (start) when the clock is shorter than the margin or its time is not
// published.
func exportBy(start, due time.Time, margin time.Duration) time.Time {
	if by := due.Add(-margin); !due.IsZero() && by.After(start) {
		return by.UTC()
	}
	return start.UTC()
}

// RunGuard runs the guard every interval (0: DefaultGuardInterval)
// until ctx ends. Only serve calls it: the desktop is not running when
// most clocks run out.
func (s *Service) RunGuard(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultGuardInterval
	}
	for sleep(ctx, s.cfg.Clock, interval) {
		s.GuardTick(ctx)
	}
}

// GuardTick starts, in the background, the guard export of every at-risk
// workspace whose ExportBy has come, and returns how many it started.
func (s *Service) GuardTick(ctx context.Context) int {
	now := s.now()
	started := 0
	for _, ws := range s.feed.atRisk() {
		if ws.ExportBy.IsZero() || now.Before(ws.ExportBy) || !s.guards.begin(ws.ID, now) {
			continue
		}
		started++
		s.goBackground(func(ctx context.Context) {
			var ok bool
			if ws.State == StateRunning {
				ok = s.guardPause(ctx, ws)
			} else {
				ok = s.guard(ctx, ws.Owner, ws.ID)
			}
			s.guards.end(ws.ID, ok, s.now())
		})
	}
	return started
}

// guard exports one at-risk workspace and pauses it again if it woke it.
// It reports whether the workspace ends covered (or no longer at risk).
func (s *Service) guard(ctx context.Context, owner, id string) bool {
	ctx = WithActor(ctx, ActorGuard)
	ws, acct, p, info, unlock, err := s.acquire(ctx, owner, id)
	if err != nil {
		return IsKind(err, KindNotFound)
	}
	defer unlock()
	if ws, err = s.refresh(ctx, ws, acct, p); err != nil || !ws.AtRisk {
		return err == nil
	}
	store := s.exportStore()
	if s.cfg.Exporter == nil || store == nil {
		return false
	}
	now := s.now()
	op, err := s.cfg.Store.PutOp(ctx, Op{WorkspaceID: ws.ID, Kind: OpExport, Step: "requested", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		return false
	}
	defer s.dropOp(op)
	rec := newExportRecord(ws, now)
	if err := store.PutExport(ctx, rec); err != nil {
		return false
	}
	woke := ws.State == StatePaused || ws.State == StateStopped
	why := fmt.Sprintf("before %s's %s deletes it", ws.Provider, ws.DeletionClock)
	s.audit(ctx, AuditEntry{Owner: ws.Owner, Actor: ActorGuard, Action: AuditExport, WorkspaceID: ws.ID,
		AccountID: ws.AccountID, Provider: ws.Provider, Outcome: "started (" + why + ")"})
	s.log.Info("guard: exporting a paused workspace "+why, "workspace", ws.ID, "export", rec.ID, "due", ws.DeletionDueAt)
	_, ws, err = s.exportWith(ctx, &op, rec, ws, acct, p, info, ExportOptions{Wake: true, GitDelta: true}, ActorGuard)
	if woke && ctx.Err() == nil {
		s.pauseAgain(ctx, &op, ws, acct, p, ActorGuard, why)
	}
	return err == nil
}

// guardPause pauses a running workspace whose box a running clock ends
// (Modal's lifetime): the pause exports first and keeps the files, as a
// person's would. It reports whether the pause started.
func (s *Service) guardPause(ctx context.Context, ws Workspace) bool {
	s.log.Info("guard: pausing a running workspace before "+ws.Provider+"'s "+ws.DeletionClock+" ends its box",
		"workspace", ws.ID, "due", ws.DeletionDueAt)
	_, err := s.Pause(WithActor(ctx, ActorGuard), ws.Owner, ws.ID)
	if err != nil && !IsKind(err, KindNotFound) {
		s.log.Warn("guard: could not pause a workspace before its box ends", "workspace", ws.ID, "err", messageOf(err))
		return false
	}
	return true
}

// pauseAgain pauses a box woken for an export (by the guard, or a person
// who asked for it); the export just made covers it.
func (s *Service) pauseAgain(ctx context.Context, op *Op, ws Workspace, acct Account, p Provider, actor, why string) {
	var box Box
	err := s.retry(ctx, op, s.budgetFor(acct, p), "pause_again", func(ctx context.Context) error {
		b, err := p.Suspend(ctx, acct, ws.BoxID)
		box = b
		return err
	})
	outcome := "ok (paused again after the export " + why + ")"
	if err != nil {
		outcome = "failed: " + messageOf(err) + " (the box was woken for an export and keeps running)"
		s.log.Warn("could not pause a box woken for an export again", "workspace", ws.ID, "actor", actor, "err", messageOf(err))
	} else if cur, ok := s.feed.Get(ws.ID); ok {
		next := s.applyBox(cur, box)
		next.StopReason = StopCompanion
		if _, serr := s.feed.Save(context.WithoutCancel(ctx), next); serr != nil {
			s.log.Warn("could not record the pause after an export", "workspace", ws.ID, "err", serr)
		}
	}
	s.audit(ctx, AuditEntry{Owner: ws.Owner, Actor: actor, Action: AuditPause, WorkspaceID: ws.ID,
		AccountID: ws.AccountID, Provider: ws.Provider, Outcome: outcome})
}

// begin marks a workspace's guard running, unless it runs already or its
// last failure asks to wait.
func (g *guardState) begin(id string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running == nil {
		g.running, g.retry, g.backoff = map[string]bool{}, map[string]time.Time{}, map[string]time.Duration{}
	}
	if g.running[id] || now.Before(g.retry[id]) {
		return false
	}
	g.running[id] = true
	return true
}

// end records how a guard went: a failure waits, longer each time.
func (g *guardState) end(id string, ok bool, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.running, id)
	if ok {
		delete(g.retry, id)
		delete(g.backoff, id)
		return
	}
	d := min(max(2*g.backoff[id], 5*time.Minute), guardBackoffMax)
	g.backoff[id], g.retry[id] = d, now.Add(d)
}

func (s *Service) guardMargin() time.Duration {
	if s.cfg.GuardMargin > 0 {
		return s.cfg.GuardMargin
	}
	return DefaultGuardMargin
}

// GuardStatus is what protects a workspace its provider paused on its
// own, as front ends explain it.
type GuardStatus struct {
	// Runs is true in serve, where the guard exports such a workspace
	// Margin before its clock runs out; the desktop only marks it at risk.
	Runs   bool
	Margin time.Duration
	// Exports says whether exports are configured: a clock companion
	// would set (a paused TTL) is offered only with them.
	Exports bool
}

// GuardStatus reports how this companion guards deletion clocks.
func (s *Service) GuardStatus() GuardStatus {
	return GuardStatus{Runs: s.cfg.ScheduledDeletion, Margin: s.guardMargin(),
		Exports: s.exportsConfigured()}
}
