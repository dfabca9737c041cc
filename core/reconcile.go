package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// ReconcileConfig tunes the reconciler.
type ReconcileConfig struct {
	// Interval between passes over one account; 0 means 15 seconds. Each
	// wait is jittered by ±20% so accounts do not move in lockstep.
	Interval time.Duration
	// MaxBackoff caps the wait after repeated failures; 0 means 5 minutes.
	MaxBackoff time.Duration
	// PerProvider is how many accounts of one provider are listed at the
	// same time; 0 means 4. Providers never wait for each other.
	PerProvider int
	// AfterPass, if set, is called by the reconciler's loop after each pass
	// over an account, once the loop is waiting for the next pass due (for
	// metrics, and for tests that drive the clock pass by pass).
	AfterPass func(accountID string, err error)
}

// DefaultPerProvider is ReconcileConfig.PerProvider's default.
const DefaultPerProvider = 4

// RunReconciler visits every account on a jittered interval until ctx
// ends: it lists the account's boxes, adopts boxes it did not create,
// updates state, paused_at, last activity and size, and marks boxes that
// vanished as deleted.
//
// Accounts are visited concurrently, each on its own schedule: at most
// PerProvider passes of one provider run at once, and a slow or failing
// account delays only itself. A failing account backs off exponentially
// (jittered) and a rate-limited one waits at least as long as the provider
// asked. Every wait is on the service's clock.
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
	if cfg.PerProvider <= 0 {
		cfg.PerProvider = DefaultPerProvider
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.bg, cancel)()
	// On a shared store the replica that lists an account keeps its lease
	// from one pass to the next (two intervals cover the jittered wait),
	// so the others skip the account until that replica stops.
	acctTTL := max(2*cfg.Interval, s.cfg.LeaseTTL)
	defer s.releaseAccounts()

	type result struct {
		id  string
		err error
	}
	type due struct {
		at       time.Time
		failures int
		running  bool
		kicked   bool // asked for while running: go again at once
	}
	sched := map[string]*due{}
	slots := map[string]chan struct{}{} // per provider
	results := make(chan result)
	var reports []result // passes to report once the next wait is armed
	var wg sync.WaitGroup
	defer wg.Wait()
	var pruned time.Time
	// The account list is read at start and again only when it changed
	// (accountsChanged, or a kick for an account not known yet): between
	// due times the loop sleeps and touches nothing. On a shared store
	// another replica or the CLI adds and removes accounts without telling
	// this process, so the list is also read again every interval (one
	// cheap query per replica).
	var accts []Account
	var listedAt time.Time
	reload := true
	for {
		now := s.now()
		if now.Sub(pruned) >= pruneEvery {
			s.pruneTombstones(ctx)
			pruned = now
		}
		next := pruned.Add(pruneEvery)
		if s.shared() && !now.Before(listedAt.Add(cfg.Interval)) {
			reload = true
		}
		if reload {
			list, err := s.cfg.Store.ListAccounts(ctx)
			switch {
			case err == nil:
				accts, reload, listedAt = list, false, now
			case ctx.Err() == nil:
				s.log.Error("reconciler: cannot list accounts", "err", err)
				next = minTime(next, now.Add(cfg.Interval)) // try again
			}
		}
		seen := map[string]bool{}
		for _, acct := range accts {
			seen[acct.ID] = true
			d := sched[acct.ID]
			if d == nil {
				d = &due{}
				sched[acct.ID] = d
			}
			if d.running {
				continue
			}
			if now.Before(d.at) {
				next = minTime(next, d.at)
				continue
			}
			slot := slots[acct.Provider]
			if slot == nil {
				slot = make(chan struct{}, cfg.PerProvider)
				slots[acct.Provider] = slot
			}
			d.running = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.pass(ctx, acct, slot, acctTTL)
				select {
				case results <- result{acct.ID, err}:
				case <-ctx.Done():
				}
			}()
		}
		for id, d := range sched {
			if !seen[id] && !d.running {
				delete(sched, id)
				s.status.forget(id)
			}
		}
		if s.shared() && !reload {
			next = minTime(next, listedAt.Add(cfg.Interval))
		}

		wake := s.cfg.Clock.NewTimer(next.Sub(now))
		if cfg.AfterPass != nil {
			for _, r := range reports {
				cfg.AfterPass(r.id, r.err)
			}
		}
		reports = reports[:0]
		select {
		case <-ctx.Done():
			wake.Stop()
			return
		case <-s.accountsChanged:
			reload = true
		case id := <-s.kick:
			if d, ok := sched[id]; ok {
				d.at = time.Time{}
				d.kicked = d.running
			} else {
				reload = true // an account added since the list was read
			}
		case r := <-results:
			d := sched[r.id]
			if d == nil {
				break
			}
			d.running = false
			if errors.Is(r.err, errAccountGone) {
				reload = true // and the next list drops it
				break
			}
			switch {
			case errors.Is(r.err, errBusy), errors.Is(r.err, errLeased):
				// The new account's first list is running, or another
				// replica lists this account.
				d.at = s.now().Add(jitter(cfg.Interval))
			case r.err != nil:
				d.failures++
				d.at = s.now().Add(passBackoff(cfg.Interval, cfg.MaxBackoff, d.failures, r.err))
				s.passFailed(r.id, r.err, d.at)
			default:
				d.failures = 0
				d.at = s.now().Add(jitter(cfg.Interval))
			}
			if d.kicked {
				d.at, d.kicked = time.Time{}, false
			}
			if !errors.Is(r.err, errBusy) && !errors.Is(r.err, errLeased) {
				reports = append(reports, r)
			}
		case <-wake.C():
		}
		wake.Stop()
	}
}

// errBusy: the account's pass is already running (its first list, started
// by AddAccount).
var errBusy = errors.New("a pass over this account is already running")

// errLeased: another replica holds the account's lease and lists it.
var errLeased = errors.New("another replica lists this account")

// errAccountGone: the account was removed from the shared store since the
// loop read the list (by another replica, or the CLI).
var errAccountGone = errors.New("the account was removed")

// pass waits for a slot of the account's provider and reconciles it, if
// this process holds (or can take) the account's lease, for leaseTTL.
func (s *Service) pass(ctx context.Context, acct Account, slot chan struct{}, leaseTTL time.Duration) error {
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-slot }()
	if !s.status.tryBusy(acct.ID) {
		return errBusy
	}
	defer s.status.done(acct.ID)
	ok, err := s.leaseAccount(ctx, acct.ID, leaseTTL)
	if err != nil {
		return fmt.Errorf("lease account %s: %w", acct.ID, err)
	}
	if !ok {
		s.followStatus(ctx, acct)
		return errLeased
	}
	defer s.renewAccountLease(acct.ID, leaseTTL)()
	if s.shared() {
		// The loop's copy may be up to an interval old: another replica
		// may have removed the account or changed its settings since.
		fresh, err := s.cfg.Store.GetAccount(ctx, acct.ID)
		if IsKind(err, KindNotFound) {
			return errAccountGone
		}
		if err != nil {
			return err
		}
		acct = fresh
	}
	err = s.reconcileAccount(ctx, acct)
	if err == nil {
		s.shareStatus(ctx, acct.ID) // a failure is shared once recorded (passFailed)
	}
	return err
}

// passFailed records a failed pass on the account's status.
func (s *Service) passFailed(id string, err error, next time.Time) {
	acct, gerr := s.cfg.Store.GetAccount(s.bg, id)
	if gerr != nil {
		return
	}
	s.log.Warn("reconcile failed; backing off", "account", id, "provider", acct.Provider, "wait", next.Sub(s.now()).Round(time.Millisecond), "err", messageOf(err), "kind", KindOf(err))
	s.setStatus(acct, func(st *AccountStatus) {
		st.State, st.Kind, st.Message, st.NextAttemptAt = AccountFailing, KindOf(err), accountProblem(acct.Provider, err), next.UTC()
	})
	s.shareStatus(s.bg, id)
}

// passBackoff is how long an account waits after its failures-th failed
// pass in a row: the interval doubled per failure up to maxBackoff,
// jittered ±20%, and never less than the provider's Retry-After.
func passBackoff(interval, maxBackoff time.Duration, failures int, err error) time.Duration {
	wait := min(interval<<min(failures, 10), maxBackoff)
	return max(jitter(wait), RetryAfterOf(err))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
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

// ReconcileAccount makes one pass over one account, unless a pass over it
// is already running (then it returns nil at once).
func (s *Service) ReconcileAccount(ctx context.Context, acct Account) error {
	if !s.status.tryBusy(acct.ID) {
		return nil
	}
	defer s.status.done(acct.ID)
	return s.reconcileAccount(ctx, acct)
}

// reconcileAccount lists the account and applies what it found; the
// caller has marked the account busy.
func (s *Service) reconcileAccount(ctx context.Context, acct Account) error {
	p, info, err := s.provider(ctx, acct)
	if err != nil {
		return err
	}
	if !info.Capabilities.List {
		err := s.reconcileByGet(ctx, acct, p, s.workspacesOf(acct.ID))
		if err == nil {
			s.passOK(acct)
		}
		return err
	}
	cctx, cancel := s.callCtx(ctx)
	boxes, err := p.List(cctx, acct)
	cancel()
	if err != nil {
		return err
	}
	return s.applyList(ctx, acct, p, boxes)
}

// workspacesOf returns the live workspaces of an account.
func (s *Service) workspacesOf(accountID string) []Workspace {
	return s.feed.OfAccount(accountID)
}

// applyList brings the account's workspaces in line with a list of its
// boxes: updates known ones, adopts a bounded number of unknown ones, and
// confirms vanished ones with Get.
func (s *Service) applyList(ctx context.Context, acct Account, p Provider, boxes []Box) error {
	mine := s.workspacesOf(acct.ID)
	byBox := map[string]Workspace{}
	byID := map[string]Workspace{}
	for _, ws := range mine {
		byID[ws.ID] = ws
		if ws.BoxID != "" {
			byBox[ws.BoxID] = ws
		}
	}
	listed := make(map[string]bool, len(boxes))
	for _, box := range boxes {
		listed[box.ID] = true
	}
	adopt := s.adoptionAllowance(ctx, acct, listed, byBox)
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
			if adopt <= 0 {
				continue // waits for a later pass
			}
			adopted, err := s.adopt(ctx, acct, box)
			if err != nil {
				return err
			}
			if adopted {
				adopt--
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
	s.passOK(acct)
	return nil
}

// passOK records a successful pass on the account's status.
func (s *Service) passOK(acct Account) {
	now := s.now()
	s.setStatus(acct, func(st *AccountStatus) {
		st.State, st.Kind, st.Message, st.LastOKAt, st.NextAttemptAt = AccountOK, "", "", now, time.Time{}
	})
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
		cur, ok, err := s.freshIdle(ctx, ws.ID)
		if err == nil && ok {
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
	next := s.listed(cur, box)
	if !changed(cur, next) {
		return nil
	}
	if s.shared() {
		// Something to write: start from the workspace as it is now,
		// which another replica may have changed (a setting, an action)
		// since this one's memory heard of it.
		var err error
		if cur, ok, err = s.freshIdle(ctx, ws.ID); err != nil || !ok {
			return err
		}
		if next = s.listed(cur, box); !changed(cur, next) {
			return nil
		}
	}
	_, err := s.feed.Save(ctx, next)
	return err
}

// listed is cur with what a list says of its box.
func (s *Service) listed(cur Workspace, box Box) Workspace {
	next := s.applyBox(cur, box)
	if next.State == StateDeleted {
		next.Error = vanishedError(cur)
	} else if cur.State == StateDeleted || cur.State == StateUnknown {
		next.Error = ""
	}
	return next
}

// adopt records a box companion did not create (or lost track of). It
// reports whether it made a workspace.
func (s *Service) adopt(ctx context.Context, acct Account, box Box) (bool, error) {
	if box.State == StateDeleted || box.State == StateDeleting || s.isGone(acct.ID, box.ID) {
		return false, nil
	}
	if id := box.Labels[LabelWorkspace]; id != "" {
		// Labelled by companion for a workspace it knows. A live one owns
		// the box (its create is still running, or another account of the
		// same organisation tracks it); a deleted one is on its way out.
		// Only a workspace that was merely forgotten (its account was
		// removed) lets the box be adopted again.
		old, err := s.cfg.Store.GetWorkspace(ctx, id)
		if err == nil && (!old.Removed || old.State == StateDeleted || old.State == StateDeleting) {
			return false, nil
		}
		if err != nil && !IsKind(err, KindNotFound) {
			return false, err
		}
	}
	name := box.Name
	if name == "" {
		name = box.ID
	}
	owner, err := s.adoptedOwner(ctx, acct, box)
	if err != nil {
		return false, err
	}
	ws := s.applyBox(Workspace{
		ID:        NewID("ws"),
		Owner:     owner,
		Name:      name,
		AccountID: acct.ID,
		Provider:  acct.Provider,
		Adopted:   true,
		CreatedAt: s.now(),
	}, box)
	if !box.CreatedAt.IsZero() {
		ws.CreatedAt = box.CreatedAt.UTC()
	}
	ws, err = s.feed.Save(ctx, ws)
	if err != nil {
		return false, err
	}
	s.log.Info("adopted box", "workspace", ws.ID, "box", box.ID, "provider", acct.Provider, "state", ws.State)
	s.audit(ctx, AuditEntry{Owner: ws.Owner, Actor: ActorReconciler, Action: AuditAdopt, WorkspaceID: ws.ID,
		AccountID: acct.ID, Provider: acct.Provider, Outcome: "ok"})
	return true, nil
}

// adoptedOwner is who an adopted box belongs to: on a shared account the
// user its owner label names (it was made for them), unless that user was
// removed; otherwise, and then, the account's owner.
func (s *Service) adoptedOwner(ctx context.Context, acct Account, box Box) (string, error) {
	label := box.Labels[LabelOwner]
	if !acct.Shared || label == "" {
		return acct.Owner, nil
	}
	if s.cfg.OwnersExist == nil {
		return label, nil
	}
	exist, err := s.cfg.OwnersExist(ctx, []string{label})
	if err != nil {
		return "", fmt.Errorf("look up the owner %s of box %s: %w", label, box.ID, err)
	}
	if !exist[label] {
		s.log.Info("adopted box names a removed user; it goes to the account's owner", "box", box.ID, "user", label, "account", acct.ID)
		return acct.Owner, nil
	}
	return label, nil
}

func (s *Service) confirmVanished(ctx context.Context, acct Account, p Provider, ws Workspace) error {
	unlock, ok := s.locks.tryLock(ws.ID)
	if !ok {
		return nil
	}
	defer unlock()
	cur, ok, err := s.freshIdle(ctx, ws.ID)
	if err != nil || !ok || cur.BoxID != ws.BoxID {
		return err
	}
	_, err = s.refresh(ctx, cur, acct, p)
	if err != nil && !IsKind(err, KindNotFound) {
		return err
	}
	return nil
}
