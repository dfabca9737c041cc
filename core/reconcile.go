package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// ReconcileConfig tunes the reconciler.
type ReconcileConfig struct {
	// Interval between passes over one account; 0 means 15 seconds. Each
	// wait is jittered by ±20% so accounts do not move in lockstep.
	Interval time.Duration
	// MaxBackoff caps the wait after repeated failures; 0 means 5 minutes.
	MaxBackoff time.Duration
}

// RunReconciler visits every account on a jittered interval until ctx
// ends: it lists the account's boxes, adopts boxes it did not create,
// updates state, paused_at, last activity and size, and marks boxes that
// vanished as deleted. A failing account backs off exponentially and a
// rate-limited one waits at least as long as the provider asked.
//
// Once an hour it also prunes old tombstones (see tombstoneKeepFor).
//
// The reconciler talks to provider APIs only (through List and Get), never
// into a box; adapters keep box-internal reads to running boxes.
func (s *Service) RunReconciler(ctx context.Context, cfg ReconcileConfig) {
	if cfg.Interval <= 0 {
		cfg.Interval = 15 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Minute
	}
	type due struct {
		at       time.Time
		failures int
	}
	sched := map[string]*due{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var pruned time.Time
	for {
		if time.Since(pruned) > pruneEvery {
			s.pruneTombstones(ctx)
			pruned = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.bg.Done():
			return
		case id := <-s.kick:
			if d, ok := sched[id]; ok {
				d.at = time.Time{}
			}
		case <-tick.C:
		}
		accts, err := s.cfg.Store.ListAccounts(ctx)
		if err != nil {
			s.log.Error("reconciler: cannot list accounts", "err", err)
			continue
		}
		now := time.Now()
		seen := map[string]bool{}
		for _, acct := range accts {
			seen[acct.ID] = true
			d, ok := sched[acct.ID]
			if !ok {
				d = &due{}
				sched[acct.ID] = d
			}
			if now.Before(d.at) {
				continue
			}
			err := s.ReconcileAccount(ctx, acct)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				d.failures++
				wait := min(cfg.Interval<<min(d.failures, 10), cfg.MaxBackoff)
				wait = max(jitter(wait), RetryAfterOf(err))
				d.at = time.Now().Add(wait)
				s.log.Warn("reconcile failed; backing off", "account", acct.ID, "provider", acct.Provider, "wait", wait.Round(time.Millisecond), "err", messageOf(err), "kind", KindOf(err))
				continue
			}
			d.failures = 0
			d.at = time.Now().Add(jitter(cfg.Interval))
		}
		for id := range sched {
			if !seen[id] {
				delete(sched, id)
			}
		}
	}
}

// Tombstones let a reconnecting client learn about removals (?since=N).
// Keeping them a week, and at most 10,000, bounds the table while covering
// any realistic disconnection; an older client gets a fresh snapshot.
const (
	tombstoneKeepFor = 7 * 24 * time.Hour
	tombstoneKeep    = 10000
	pruneEvery       = time.Hour
)

func (s *Service) pruneTombstones(ctx context.Context) {
	if err := s.cfg.Store.PruneTombstones(ctx, s.now().Add(-tombstoneKeepFor), tombstoneKeep); err != nil {
		s.log.Warn("could not prune removed workspaces", "err", err)
	}
}

func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// ReconcileAccount makes one pass over one account.
func (s *Service) ReconcileAccount(ctx context.Context, acct Account) error {
	p, info, err := s.provider(ctx, acct)
	if err != nil {
		return err
	}
	_, live := s.feed.Snapshot()
	var mine []Workspace
	byBox := map[string]Workspace{}
	byID := map[string]Workspace{}
	for _, ws := range live {
		if ws.AccountID != acct.ID {
			continue
		}
		mine = append(mine, ws)
		byID[ws.ID] = ws
		if ws.BoxID != "" {
			byBox[ws.BoxID] = ws
		}
	}
	if !info.Capabilities.List {
		return s.reconcileByGet(ctx, acct, p, mine)
	}
	cctx, cancel := s.callCtx(ctx)
	boxes, err := p.List(cctx, acct)
	cancel()
	if err != nil {
		return err
	}
	listed := make(map[string]bool, len(boxes))
	for _, box := range boxes {
		listed[box.ID] = true
	}
	for _, box := range boxes {
		ws, ok := byBox[box.ID]
		if !ok {
			// A box labelled with one of our workspaces but under a new id
			// (lost create response, identity change on resume).
			ws, ok = byID[box.Labels[LabelWorkspace]]
			if ok && ws.BoxID != "" && listed[ws.BoxID] {
				ok = false // that workspace already has a live box
			}
		}
		if !ok {
			if err := s.adopt(ctx, acct, box); err != nil {
				return err
			}
			continue
		}
		if err := s.update(ctx, ws, box); err != nil {
			return err
		}
	}
	for _, ws := range mine {
		if ws.BoxID == "" || listed[ws.BoxID] || ws.State == StateDeleted {
			continue
		}
		// Lists can be eventually consistent: confirm with Get before
		// calling a box gone.
		if err := s.confirmVanished(ctx, acct, p, ws); err != nil {
			return err
		}
	}
	return nil
}

// reconcileByGet refreshes each workspace individually, for providers
// without a list call.
func (s *Service) reconcileByGet(ctx context.Context, acct Account, p Provider, mine []Workspace) error {
	for _, ws := range mine {
		if ws.BoxID == "" || ws.State == StateDeleted {
			continue
		}
		unlock, ok := s.locks.tryLock(ws.ID)
		if !ok {
			continue
		}
		cur, err := s.Workspace(ws.Owner, ws.ID)
		if err == nil {
			_, err = s.refresh(ctx, cur, acct, p)
		}
		unlock()
		if err != nil && !IsKind(err, KindNotFound) {
			return err
		}
	}
	return nil
}

// update records a listed box's state on its workspace, unless an action
// holds the workspace.
func (s *Service) update(ctx context.Context, ws Workspace, box Box) error {
	unlock, ok := s.locks.tryLock(ws.ID)
	if !ok {
		return nil
	}
	defer unlock()
	cur, ok := s.feed.Get(ws.ID)
	if !ok {
		return nil
	}
	next := s.applyBox(cur, box)
	if next.State == StateDeleted {
		next.Error = fmt.Sprintf("box %s was deleted at %s outside companion", box.ID, cur.Provider)
	} else if cur.State == StateDeleted || cur.State == StateUnknown {
		next.Error = ""
	}
	if !changed(cur, next) {
		return nil
	}
	_, err := s.feed.Save(ctx, next)
	return err
}

// adopt records a box companion did not create (or lost track of).
func (s *Service) adopt(ctx context.Context, acct Account, box Box) error {
	if box.State == StateDeleted || box.State == StateDeleting || s.isGone(acct.ID, box.ID) {
		return nil
	}
	if id := box.Labels[LabelWorkspace]; id != "" {
		// Labelled by companion for a workspace it knows. A live one owns
		// the box (its create is still running, or another account of the
		// same organisation tracks it); a deleted one is on its way out.
		// Only a workspace that was merely forgotten (its account was
		// removed) lets the box be adopted again.
		old, err := s.cfg.Store.GetWorkspace(ctx, id)
		if err == nil && (!old.Removed || old.State == StateDeleted || old.State == StateDeleting) {
			return nil
		}
		if err != nil && !IsKind(err, KindNotFound) {
			return err
		}
	}
	name := box.Name
	if name == "" {
		name = box.ID
	}
	ws := s.applyBox(Workspace{
		ID:        NewID("ws"),
		Owner:     acct.Owner,
		Name:      name,
		AccountID: acct.ID,
		Provider:  acct.Provider,
		Adopted:   true,
		CreatedAt: s.now(),
	}, box)
	if !box.CreatedAt.IsZero() {
		ws.CreatedAt = box.CreatedAt.UTC()
	}
	ws, err := s.feed.Save(ctx, ws)
	if err == nil {
		s.log.Info("adopted box", "workspace", ws.ID, "box", box.ID, "provider", acct.Provider, "state", ws.State)
	}
	return err
}

func (s *Service) confirmVanished(ctx context.Context, acct Account, p Provider, ws Workspace) error {
	unlock, ok := s.locks.tryLock(ws.ID)
	if !ok {
		return nil
	}
	defer unlock()
	cur, ok := s.feed.Get(ws.ID)
	if !ok || cur.BoxID != ws.BoxID {
		return nil
	}
	_, err := s.refresh(ctx, cur, acct, p)
	if err != nil && !IsKind(err, KindNotFound) {
		return err
	}
	return nil
}
