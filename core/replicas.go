package core

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// AccountLeases is a store's lease per provider account, shared by every
// companion on the store: the reconciler lists an account only while it
// holds the account's lease, so several replicas do not multiply a
// provider's rate limit. The PostgreSQL store implements it; on SQLite one
// process owns the data dir and needs none.
type AccountLeases interface {
	// TryLeaseAccount takes (or, for the same holder, renews) the lease of
	// accountID for ttl and reports whether holder has it.
	TryLeaseAccount(ctx context.Context, accountID, holder string, ttl time.Duration) (bool, error)
	// ReleaseAccountLease drops holder's lease of accountID.
	ReleaseAccountLease(ctx context.Context, accountID, holder string) error
}

// OpClaims are claims on journal entries, on a store shared by several
// companions: the replica running an entry holds its claim and renews it;
// a claim that lapsed (its replica died) is taken over by another
// replica's recovery pass, and by exactly one. The PostgreSQL store
// implements it; on SQLite the journal is recovered at start-up only.
type OpClaims interface {
	// ClaimOp takes (or renews) holder's claim of entry id for ttl. It
	// reports false when another holder's claim has not lapsed or the
	// entry is gone.
	ClaimOp(ctx context.Context, id int64, holder string, ttl time.Duration) (bool, error)
	// ClaimLapsedOps claims for holder, for ttl, at most limit entries
	// whose claim lapsed or was never taken and whose workspace nobody
	// holds a lease of, oldest first. Entries another replica is claiming
	// at the same moment are skipped, never waited for.
	ClaimLapsedOps(ctx context.Context, holder string, ttl time.Duration, limit int) ([]Op, error)
	// RenewOpClaims extends holder's claims of ids by ttl (taking again
	// one that lapsed while nobody else took it) and returns the ids whose
	// claim another holder has now. A closed entry is in neither case.
	RenewOpClaims(ctx context.Context, holder string, ids []int64, ttl time.Duration) (lost []int64, err error)
	// ReleaseOpClaim lets go of holder's claim of id (a gone entry is no
	// error).
	ReleaseOpClaim(ctx context.Context, id int64, holder string) error
	// OpsOfWorkspace returns a workspace's open entries, oldest first.
	OpsOfWorkspace(ctx context.Context, workspaceID string) ([]Op, error)
}

// replication is what a Service needs to share its store with other
// replicas. On a store without leases or claims (SQLite) the interfaces
// are nil and none of this runs.
type replication struct {
	holder   string // this process, in every lease and claim it takes
	ttl      time.Duration
	accounts AccountLeases
	claims   OpClaims
	statuses SharedAccountStatus

	mu sync.Mutex
	// claimed are the journal entries this process runs, each with the
	// cancel of its run's context (nil until the run starts).
	claimed map[int64]context.CancelFunc
	leased  map[string]struct{} // accounts whose lease this process holds
	once    sync.Once           // starts the claim renewer

	// leasesTaken counts account leases taken that this process did not
	// hold; takeovers the lapsed journal entries it claimed (metrics).
	leasesTaken, takeovers atomic.Int64
}

func newReplication(st Store, ttl time.Duration) *replication {
	r := &replication{holder: NewID("lease"), ttl: ttl, claimed: map[int64]context.CancelFunc{}, leased: map[string]struct{}{}}
	r.accounts, _ = st.(AccountLeases)
	r.claims, _ = st.(OpClaims)
	r.statuses, _ = st.(SharedAccountStatus)
	return r
}

// shared reports whether the store is shared with other processes, so
// that what this process keeps in memory may be stale.
func (s *Service) shared() bool { return s.locks.shared != nil }

// storeCall bounds one store call made for leases and claims.
func storeCall() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), leaseTimeout)
}

// goOp runs a journaled action in the background, where it owns the
// workspace's lock (unlock) and, on a shared store, its entry's claim,
// renewed until run returns. A claim that cannot be taken is logged: the
// workspace's lease, held for the whole run, already keeps other replicas
// off the entry.
func (s *Service) goOp(op Op, unlock func(), run func(ctx context.Context)) {
	s.holdClaim(op.ID, true)
	s.goBackground(func(ctx context.Context) {
		defer unlock()
		defer s.releaseOpClaim(op.ID)
		ctx, stop := s.claimedRun(ctx, op.ID)
		defer stop()
		run(ctx)
	})
}

// claimedRun is the context an entry's run goes on in: it ends when this
// process learns that another replica holds the entry's claim (this one
// could not renew it in time, and the entry was taken over). The action
// then stops as at a shutdown, leaving the entry to its new holder, so
// that no two replicas ever drive one action.
func (s *Service) claimedRun(ctx context.Context, id int64) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	r := s.rep
	if r.claims == nil {
		return ctx, cancel
	}
	r.mu.Lock()
	r.claimed[id] = cancel
	r.mu.Unlock()
	return ctx, cancel
}

// holdClaim counts op id among the entries this process renews; with
// take, it takes the claim first.
func (s *Service) holdClaim(id int64, take bool) {
	r := s.rep
	if r.claims == nil {
		return
	}
	if take {
		ctx, cancel := storeCall()
		ok, err := r.claims.ClaimOp(ctx, id, r.holder, r.ttl)
		cancel()
		if err != nil || !ok {
			s.log.Warn("could not claim a journal entry; the workspace's lease covers it", "op", id, "err", err)
		}
	}
	r.mu.Lock()
	r.claimed[id] = nil
	r.mu.Unlock()
	r.once.Do(func() { s.goBackground(s.renewClaims) })
}

// releaseOpClaim stops renewing op id's claim and lets go of it, so that an
// entry left open (interrupted by a shutdown) is taken over at once by
// another replica rather than after its claim lapses.
func (s *Service) releaseOpClaim(id int64) {
	r := s.rep
	if r.claims == nil {
		return
	}
	r.mu.Lock()
	delete(r.claimed, id)
	r.mu.Unlock()
	ctx, cancel := storeCall()
	defer cancel()
	if err := r.claims.ReleaseOpClaim(ctx, id, r.holder); err != nil {
		s.log.Warn("could not release a journal claim; it lapses", "op", id, "err", err)
	}
}

// renewClaims renews the claims of the entries this process runs every
// TTL/3 until the service closes. Claims lapse in the database's time, so
// this waits on the real clock.
func (s *Service) renewClaims(ctx context.Context) {
	r := s.rep
	for {
		t := RealClock{}.NewTimer(r.ttl / 3)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		r.mu.Lock()
		ids := make([]int64, 0, len(r.claimed))
		for id := range r.claimed {
			ids = append(ids, id)
		}
		r.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		cctx, cancel := storeCall()
		lost, err := r.claims.RenewOpClaims(cctx, r.holder, ids, r.ttl)
		cancel()
		if err != nil {
			s.log.Warn("could not renew journal claims", "err", err)
			continue
		}
		for _, id := range lost {
			r.mu.Lock()
			stop := r.claimed[id]
			r.mu.Unlock()
			s.log.Warn("another replica took over an action this one was running (its claim lapsed); stopping it here", "op", id)
			if stop != nil {
				stop()
			}
		}
	}
}

// recoverShared is Recover on a shared store: one recovery pass now, then
// one every TTL/2 in the background, on every replica, so entries of a
// replica that died are resumed by another once their claims lapse.
func (s *Service) recoverShared(ctx context.Context) error {
	if err := s.recoveryPass(ctx); err != nil {
		return err
	}
	s.goBackground(func(ctx context.Context) {
		// Staging files a killed replica left whose records were failed
		// meanwhile (or whose takeover could not remove them): at start,
		// then every stagingSweepPasses passes.
		if res := s.sweepStagingLogged(ctx, ""); res.Unmarked > 0 {
			s.log.Warn("staging directories without an export record in their name are left in the export dir: an older companion wrote them and this one cannot tell whether a replica still writes there; remove them by hand once no older replica runs",
				"count", res.Unmarked)
		}
		for pass := 1; ; pass++ {
			t := RealClock{}.NewTimer(s.rep.ttl / 2)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			if err := s.recoveryPass(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("journal recovery pass failed; the next one retries", "err", err)
			}
			if pass%stagingSweepPasses == 0 {
				s.sweepStagingLogged(ctx, "")
			}
		}
	})
	return nil
}

// recoveryBatch bounds the entries one pass claims.
const recoveryBatch = 50

// recoveryPass claims journal entries whose claim lapsed and resumes each
// under its workspace's lock.
func (s *Service) recoveryPass(ctx context.Context) error {
	r := s.rep
	ops, err := r.claims.ClaimLapsedOps(ctx, r.holder, r.ttl, recoveryBatch)
	if err != nil {
		return fmt.Errorf("claim journal entries: %w", err)
	}
	r.takeovers.Add(int64(len(ops)))
	for _, op := range ops {
		s.resumeClaimed(ctx, op)
	}
	return nil
}

// resumeClaimed resumes one entry this process claimed. Under the
// workspace's lock it reads the entry and the workspace again from the
// store: between the claim and the lock another replica may have finished
// or superseded the action, and the entry must then be dropped, not run.
func (s *Service) resumeClaimed(ctx context.Context, claimed Op) {
	r := s.rep
	s.holdClaim(claimed.ID, false)
	unlock, ok := s.locks.tryLock(claimed.WorkspaceID)
	if !ok {
		s.releaseOpClaim(claimed.ID) // an action runs on it: a later pass looks again
		return
	}
	done := func() { s.releaseOpClaim(claimed.ID); unlock() }
	ops, err := r.claims.OpsOfWorkspace(ctx, claimed.WorkspaceID)
	if err != nil {
		s.log.Warn("could not read a claimed journal entry", "op", claimed.ID, "err", err)
		done()
		return
	}
	i := slices.IndexFunc(ops, func(o Op) bool { return o.ID == claimed.ID })
	if i < 0 {
		done() // finished meanwhile
		return
	}
	op := ops[i]
	s.failDeadExports(ctx, op.WorkspaceID)
	// Under the workspace's lock no live export of it can run: the dead
	// replica's staging files (their records are failed now) go at once.
	s.sweepStagingLogged(ctx, op.WorkspaceID)
	ws, err := s.cfg.Store.GetWorkspace(ctx, op.WorkspaceID)
	if err != nil && !IsKind(err, KindNotFound) {
		s.log.Warn("could not read the workspace of a claimed journal entry", "op", op.ID, "err", err)
		done()
		return
	}
	if err != nil || ws.Removed || i != len(ops)-1 || ws.State != opState(op.Kind) {
		// Gone, superseded, or finished before its entry was closed.
		s.dropOp(op)
		done()
		return
	}
	acct, err := s.cfg.Store.GetAccount(ctx, ws.AccountID)
	if err != nil {
		ws.State, ws.Error = StateError, "its account was removed before the "+string(op.Kind)+" finished"
		s.finish(ctx, op, ws, err)
		done()
		return
	}
	s.log.Info("taking over an action another replica left", "workspace", ws.ID, "action", op.Kind, "step", op.Step, "attempts", op.Attempts)
	s.goBackground(func(ctx context.Context) {
		defer done()
		ctx, stop := s.claimedRun(ctx, op.ID)
		defer stop()
		s.runOp(ctx, op, ws, acct)
	})
}

// fresh returns workspace id as it is now, for a caller holding its lock:
// from the store when the store is shared (another replica may have
// changed it since this one's memory heard of it), else from memory. A
// removed workspace is not found.
func (s *Service) fresh(ctx context.Context, id string) (Workspace, bool, error) {
	if !s.shared() {
		ws, ok := s.feed.Get(id)
		return ws, ok, nil
	}
	ws, err := s.cfg.Store.GetWorkspace(ctx, id)
	if IsKind(err, KindNotFound) {
		return Workspace{}, false, nil
	}
	if err != nil {
		return Workspace{}, false, err
	}
	ws, ok := s.stored(ws, true)
	return ws, ok, nil
}

// freshHeld is fresh for a caller holding the lock h: on a shared store
// it uses the workspace read with the lease when h has it (one round trip
// for lock and re-read; only a shared store's lease reads), and reads the
// store otherwise.
func (s *Service) freshHeld(ctx context.Context, id string, h *held) (Workspace, bool, error) {
	if h == nil || h.read == nil {
		return s.fresh(ctx, id)
	}
	r := h.read
	h.read = nil // what the lease read is current only until this holder writes
	ws, ok := s.stored(r.Workspace, r.Found)
	return ws, ok, nil
}

// stored is a workspace read from a shared store as fresh returns it: a
// removed one is not found, and the progress line (transient, not
// stored) comes from memory.
func (s *Service) stored(ws Workspace, found bool) (Workspace, bool) {
	if !found || ws.Removed {
		return Workspace{}, false
	}
	if mem, ok := s.feed.Get(ws.ID); ok {
		ws.Progress = mem.Progress
	}
	return ws, true
}

// freshOfHeld is freshHeld for an owner's request: another owner's or a
// missing workspace is not found.
func (s *Service) freshOfHeld(ctx context.Context, owner, id string, h *held) (Workspace, error) {
	ws, ok, err := s.freshHeld(ctx, id, h)
	if err != nil {
		return Workspace{}, err
	}
	if !ok || ws.Owner != owner {
		return Workspace{}, Errorf(KindNotFound, "workspace %q not found", id)
	}
	return ws, nil
}

// saveUnlocking saves ws as the last store work of an action holding h
// and lets go of h. On a shared store the lease is released by the save's
// own statement (one round trip instead of two), so it ends exactly when
// the save commits and never before; should the save fail, unlock
// releases it on its own. The lease stops being renewed first, so no
// renewal can take it again after the save released it.
func (s *Service) saveUnlocking(ctx context.Context, ws Workspace, h *held) (Workspace, error) {
	defer h.unlock()
	if h.l == nil {
		return s.feed.Save(ctx, ws)
	}
	h.stopRenew()
	leases, holder := h.l.shared.leases, h.l.shared.holder
	saved, err := s.feed.saveVia(ctx, ws, func(ctx context.Context, ws Workspace) (Workspace, error) {
		return leases.SaveWorkspaceReleasing(ctx, ws, holder)
	})
	if err == nil {
		h.leaseGone = true
	}
	return saved, err
}

// freshOf is fresh for an owner's request: another owner's or a missing
// workspace is not found.
func (s *Service) freshOf(ctx context.Context, owner, id string) (Workspace, error) {
	return s.freshOfHeld(ctx, owner, id, nil)
}

// leaseAccount takes or renews this process's lease of an account for the
// reconciler, for ttl. Without account leases (one process) it always
// succeeds.
func (s *Service) leaseAccount(ctx context.Context, accountID string, ttl time.Duration) (bool, error) {
	r := s.rep
	if r.accounts == nil {
		return true, nil
	}
	ok, err := r.accounts.TryLeaseAccount(ctx, accountID, r.holder, ttl)
	r.mu.Lock()
	if ok {
		if _, had := r.leased[accountID]; !had {
			r.leasesTaken.Add(1)
		}
		r.leased[accountID] = struct{}{}
	} else {
		delete(r.leased, accountID)
	}
	r.mu.Unlock()
	return ok, err
}

// releaseAccounts lets go of every account lease this process holds, so
// that another replica's reconciler takes them over at once.
func (s *Service) releaseAccounts() {
	r := s.rep
	if r.accounts == nil {
		return
	}
	r.mu.Lock()
	ids := make([]string, 0, len(r.leased))
	for id := range r.leased {
		ids = append(ids, id)
	}
	clear(r.leased)
	r.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := storeCall()
		if err := r.accounts.ReleaseAccountLease(ctx, id, r.holder); err != nil {
			s.log.Warn("could not release an account lease; it lapses", "account", id, "err", err)
		}
		cancel()
	}
}

// renewAccountLease keeps renewing an account's lease while a long pass
// runs, until stop is called.
func (s *Service) renewAccountLease(accountID string, ttl time.Duration) (stop func()) {
	if s.rep.accounts == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		for {
			t := RealClock{}.NewTimer(ttl / 3)
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C():
			}
			ctx, cancel := storeCall()
			s.leaseAccount(ctx, accountID, ttl)
			cancel()
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// SharedStore reports whether the store is shared with other companion
// processes (PostgreSQL), whose work in progress this one must not take
// for left over.
func (s *Service) SharedStore() bool { return s.shared() }

// failDeadExports fails the running export records of a workspace whose
// journal entry this process took over. Exports run under the workspace's
// lock, which this process holds: a running one was its dead replica's and
// can never be verified.
func (s *Service) failDeadExports(ctx context.Context, workspaceID string) {
	store := s.exportStore()
	if store == nil {
		return
	}
	list, err := store.ListExports(ctx, workspaceID)
	if err != nil {
		s.log.Warn("could not read the exports of a workspace taken over", "workspace", workspaceID, "err", err)
		return
	}
	for _, e := range list {
		if e.State != ExportRunning {
			continue
		}
		if err := s.failInterrupted(ctx, store, e, "the companion replica running the export stopped before it was verified; start a new export"); err != nil {
			s.log.Warn("could not fail an export left by a stopped replica", "export", e.ID, "err", err)
		}
	}
}

// lookup finds an owner's workspace before its lock is taken: in memory,
// or, on a shared store, in the store when this replica has not heard of
// it yet (created through another replica a moment ago).
func (s *Service) lookup(ctx context.Context, owner, id string) (Workspace, error) {
	ws, err := s.Workspace(owner, id)
	if err == nil || !s.shared() {
		return ws, err
	}
	return s.freshOf(ctx, owner, id)
}

// freshIdle is fresh for the reconciler: a workspace with an open journal
// entry is not found. On one process the lock already says so; on a
// shared store a replica that died leaves its entry and its workspace in a
// transitional state once its lease lapses, and the replica that takes the
// entry over must find that state, not one a list wrote meanwhile.
func (s *Service) freshIdle(ctx context.Context, id string) (Workspace, bool, error) {
	ws, ok, err := s.fresh(ctx, id)
	if err != nil || !ok || s.rep.claims == nil || !s.shared() {
		return ws, ok, err
	}
	ops, err := s.rep.claims.OpsOfWorkspace(ctx, id)
	if err != nil {
		return ws, false, err
	}
	return ws, len(ops) == 0, nil
}

// reloadPolicies reads the retention policies again (another replica may
// have changed one, and its announcement may have been lost) and
// recomputes delete_after on the workspaces of every account whose policy
// changed.
func (s *Service) reloadPolicies(ctx context.Context) error {
	r := s.ret
	var changed []string
	r.reloadMu.Lock()
	list, err := r.store.RetentionPolicies(ctx)
	if err != nil {
		r.reloadMu.Unlock()
		return err
	}
	r.mu.Lock()
	for _, p := range list {
		if old, ok := r.policies[p.AccountID]; !ok || !samePolicy(old, p) {
			changed = append(changed, p.AccountID)
		}
		r.policies[p.AccountID] = p
	}
	r.mu.Unlock()
	r.reloadMu.Unlock()
	r.waitMu.Lock()
	for id := range r.redo {
		changed = append(changed, id)
	}
	clear(r.redo)
	r.waitMu.Unlock()
	for i, id := range changed {
		if err := s.rederiveAccount(ctx, id); err != nil {
			for _, id := range changed[i:] {
				s.redoAccount(id)
			}
			return err
		}
	}
	return nil
}

// redoAccount leaves an account's workspaces to the next tick's pass,
// after a pass over them failed.
func (s *Service) redoAccount(id string) {
	s.ret.waitMu.Lock()
	s.ret.redo[id] = struct{}{}
	s.ret.waitMu.Unlock()
}

// samePolicy reports whether two policies of one account are the same.
func samePolicy(a, b RetentionPolicy) bool {
	if (a.StoragePricePerGiBMonth == nil) != (b.StoragePricePerGiBMonth == nil) ||
		(a.StoragePricePerGiBMonth != nil && *a.StoragePricePerGiBMonth != *b.StoragePricePerGiBMonth) {
		return false
	}
	return a.AccountID == b.AccountID && a.Enabled == b.Enabled && a.PausedFor == b.PausedFor &&
		a.WarnBefore == b.WarnBefore && a.UpdatedAt.Equal(b.UpdatedAt)
}

// refreshPolicy reads one account's policy from the store into memory and
// reports whether it differed from what this process had.
func (s *Service) refreshPolicy(ctx context.Context, accountID string) (bool, error) {
	r := s.ret
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	p, found, err := r.store.RetentionPolicy(ctx, accountID)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, had := r.policies[accountID]
	switch {
	case !found && !had:
		return false, nil
	case !found:
		delete(r.policies, accountID) // its account was removed
		return true, nil
	}
	r.policies[accountID] = p
	return !had || !samePolicy(old, p), nil
}

// policyAnnounced is what a replica does when another one announces that
// an account's policy changed: read it from the store and bring
// delete_after up to date on the account's workspaces at once.
func (s *Service) policyAnnounced(ctx context.Context, accountID string) {
	if s.ret.store == nil {
		return
	}
	changed, err := s.refreshPolicy(ctx, accountID)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("could not read a retention policy another replica changed; the next retention tick reads it", "account", accountID, "err", err)
		}
		return
	}
	if !changed {
		return // already read (a save confirmed it, say)
	}
	s.log.Info("retention policy changed on another replica; delete_after follows it", "account", accountID)
	if err := s.rederiveAccount(ctx, accountID); err != nil && ctx.Err() == nil {
		s.redoAccount(accountID)
		s.log.Warn("could not bring delete_after up to date after a policy change; the next retention tick does", "account", accountID, "err", err)
	}
}

// confirmPolicy runs before each save (Feed.prepare). On a shared store,
// a save that would change a workspace's delete_after first reads its
// account's policy from the store: the change may be this process's
// policy being stale (another replica changed it, and the announcement is
// still on its way or was lost), not the workspace's state. Saves that
// leave delete_after as it is, and saves of workspaces no policy applies
// to (running, kept, removed), cost nothing.
func (s *Service) confirmPolicy(ctx context.Context, ws Workspace) {
	if !s.shared() || !s.cfg.ScheduledDeletion || s.ret.store == nil || !retentionApplies(ws) ||
		policyConfirmed(ctx, ws.AccountID) || s.deriveRetention(ws).DeleteAfter.Equal(ws.DeleteAfter) {
		return
	}
	changed, err := s.refreshPolicy(ctx, ws.AccountID)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("could not confirm a retention policy before a save; it derives from the one in memory", "account", ws.AccountID, "err", err)
		}
		return
	}
	if changed {
		s.rederiveLater(ws.AccountID)
	}
}

// policyConfirmedKey marks a context whose work follows a fresh read of
// one account's policy from the store (a re-derive pass over the
// account): confirmPolicy does not read it again for each save.
type policyConfirmedKey struct{}

func withPolicyConfirmed(ctx context.Context, accountID string) context.Context {
	return context.WithValue(ctx, policyConfirmedKey{}, accountID)
}

func policyConfirmed(ctx context.Context, accountID string) bool {
	id, ok := ctx.Value(policyConfirmedKey{}).(string)
	return ok && id == accountID
}

// rederiveLater brings delete_after up to date on an account's workspaces
// in the background, after this process found its policy changed in the
// store while doing something else: the announcement was missed or is
// late, and the account's other workspaces need the new policy too.
func (s *Service) rederiveLater(accountID string) {
	s.goBackground(func(ctx context.Context) {
		if err := s.rederiveAccount(ctx, accountID); err != nil && ctx.Err() == nil {
			s.redoAccount(accountID)
			s.log.Warn("could not bring delete_after up to date after a policy change; the next retention tick does", "account", accountID, "err", err)
		}
	})
}

// rederiveAccount recomputes delete_after on an account's workspaces. On a
// shared store this replica's memory may lack workspaces other replicas
// made, or hold stale copies: it goes over the store's, each re-read
// under its lock. A workspace busy with an action of this process is
// derived again once the action releases it (its last save may have come
// before the policy changed); one busy on another replica is that
// replica's: it hears of the change too and does the same.
func (s *Service) rederiveAccount(ctx context.Context, accountID string) error {
	if !s.shared() {
		return s.feed.rederive(ctx, accountID)
	}
	// Every caller has just read or written the account's policy: the
	// saves of this pass derive from it without reading it again each.
	ctx = withPolicyConfirmed(ctx, accountID)
	list, err := s.cfg.Store.ListWorkspaces(ctx)
	if err != nil {
		return err
	}
	for _, ws := range list {
		if ws.AccountID != accountID || s.deriveRetention(ws).DeleteAfter.Equal(ws.DeleteAfter) {
			continue
		}
		if err := s.rederiveOne(ctx, ws.ID); err != nil {
			return err
		}
	}
	return nil
}

// rederiveOne saves workspace id again if its delete_after is not the one
// the policy in memory derives, under its lock; if this process's action
// holds the lock, it does so once the action ends.
func (s *Service) rederiveOne(ctx context.Context, id string) error {
	unlock, ok := s.locks.tryLock(id)
	if !ok {
		if released, here := s.locks.heldHere(id); here {
			s.rederiveAfter(id, released)
		}
		return nil
	}
	defer unlock()
	_, err := s.rederiveLocked(ctx, id)
	return err
}

// rederiveLocked saves workspace id again, for a caller holding its lock,
// if its delete_after is not the one the policy in memory derives. It
// returns the workspace as read.
func (s *Service) rederiveLocked(ctx context.Context, id string) (Workspace, error) {
	cur, ok, err := s.freshIdle(ctx, id)
	if err == nil && ok && !s.deriveRetention(cur).DeleteAfter.Equal(cur.DeleteAfter) {
		_, err = s.feed.Save(ctx, cur)
	}
	return cur, err
}

// rederiveAfter derives workspace id's schedule again once this process's
// action on it releases its lock (once per workspace however many policy
// changes arrive meanwhile).
func (s *Service) rederiveAfter(id string, released <-chan struct{}) {
	r := s.ret
	r.waitMu.Lock()
	if _, ok := r.waiting[id]; ok {
		r.waitMu.Unlock()
		return
	}
	r.waiting[id] = struct{}{}
	r.waitMu.Unlock()
	s.goBackground(func(ctx context.Context) {
		defer func() {
			r.waitMu.Lock()
			delete(r.waiting, id)
			r.waitMu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-released:
			}
			unlock, ok := s.locks.tryLock(id)
			if !ok {
				var here bool
				if released, here = s.locks.heldHere(id); here {
					continue // the next action of this process: after it
				}
				// Another replica acts on it now; its saves derive from
				// the policy it holds, which it re-reads as this one did.
				return
			}
			cur, err := s.rederiveLocked(ctx, id)
			unlock()
			if err != nil && ctx.Err() == nil {
				if cur.AccountID != "" {
					s.redoAccount(cur.AccountID)
				}
				s.log.Warn("could not bring delete_after up to date after an action; the next retention tick does", "workspace", id, "err", err)
			}
			return
		}
	})
}

// RetentionWarnOnce is a store's atomic "record this warning unless it was
// recorded", so that replicas ticking at the same moment warn once. The
// PostgreSQL store implements it; one process needs none.
type RetentionWarnOnce interface {
	// MarkRetentionWarnedOnce records the delete_after a workspace was
	// warned about and reports whether it was not recorded before.
	MarkRetentionWarnedOnce(ctx context.Context, workspaceID string, deleteAfter time.Time) (bool, error)
}

// markWarned records a retention warning and reports whether this
// process is the one to send it.
func (s *Service) markWarned(ctx context.Context, ws Workspace) (bool, error) {
	if wo, ok := s.ret.store.(RetentionWarnOnce); ok && s.shared() {
		return wo.MarkRetentionWarnedOnce(ctx, ws.ID, ws.DeleteAfter)
	}
	return true, s.ret.store.MarkRetentionWarned(ctx, ws.ID, ws.DeleteAfter)
}
