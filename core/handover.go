package core

import (
	"context"
	"fmt"
	"slices"
)

// The audit trail names a hand-over (HandOverOrphans) so: action, actor
// (companion does it on its own) and, in the outcome, why.
const (
	AuditHandOver = "handover"
	ActorHandOver = "hand-over"

	outcomeBeforeSignIn = "ok (made before sign-in was turned on)"
	outcomeUserRemoved  = "ok (its user was removed)"
)

// HandOver counts what HandOverOrphans gave away.
type HandOver struct {
	Accounts, Workspaces, Exports int
	// Busy lists workspaces whose lock stayed taken; the next call takes
	// them.
	Busy []string
}

// OwnersExist reports which of the user ids owners still exist (those
// missing from the answer do not).
type OwnersExist func(ctx context.Context, owners []string) (map[string]bool, error)

// HandOverOrphans makes user to the owner of every account, workspace and
// export record whose owner is nobody: "" (what desktop mode or serve
// without a sign-in method made) or a user Config.OwnersExist says is
// gone (without it, only ""). Without a hand-over they would be seen by
// nobody while their boxes kept running.
//
// Owners are looked up (in one call of OwnersExist) after what they own was
// read, and user ids are never reused, so a user made meanwhile (on
// another replica) never loses what they just made. Each workspace
// changes under its lock and reaches the stream as an upsert; each change
// is audited under its new owner. Calling it again is a no-op, and a
// workspace that stays busy for the lock's wait is left for the next call
// (reported in Busy). The service must be loaded.
func (s *Service) HandOverOrphans(ctx context.Context, to string) (HandOver, error) {
	var n HandOver
	if to == "" {
		return n, Errorf(KindInvalid, "hand-over needs a user to give to")
	}
	o := &orphans{exist: s.cfg.OwnersExist, gone: map[string]bool{}}
	// The workspaces' owners are read first; the accounts, and then the
	// users, in handOverAccounts.
	accounts, err := s.handOverAccounts(ctx, to, o, s.feed.owners())
	n.Accounts = accounts
	if err != nil {
		return n, err
	}
	// Only the workspaces of owners found gone (rarely any) are locked.
	for _, id := range s.feed.idsOwnedBy(func(owner string) bool { return owner != to && (owner == "" || o.gone[owner]) }) {
		res, exports, err := s.handOverWorkspace(ctx, id, to, o)
		n.Exports += exports
		switch {
		case err != nil:
			return n, fmt.Errorf("hand over workspace %s: %w", id, err)
		case res == handedOver:
			n.Workspaces++
		case res == stayedBusy:
			n.Busy = append(n.Busy, id)
		}
	}
	return n, nil
}

// orphans remembers, for one hand-over, which owners are gone (a removed
// user stays removed; one found to exist is left alone this time).
type orphans struct {
	exist OwnersExist     // nil: every owner but "" exists
	gone  map[string]bool // every owner looked up
}

// learn looks up, in one call, the owners not looked up yet.
func (o *orphans) learn(ctx context.Context, owners []string) error {
	var ask []string
	asked := map[string]bool{}
	for _, owner := range owners {
		if _, known := o.gone[owner]; owner != "" && !known && !asked[owner] {
			asked[owner] = true
			ask = append(ask, owner)
		}
	}
	if len(ask) == 0 || o.exist == nil {
		for _, owner := range ask {
			o.gone[owner] = false
		}
		return nil
	}
	exist, err := o.exist(ctx, ask)
	if err != nil {
		return fmt.Errorf("look up %d owners among the users: %w", len(ask), err)
	}
	for _, owner := range ask {
		o.gone[owner] = !exist[owner]
	}
	return nil
}

func (o *orphans) orphaned(ctx context.Context, owner string) (bool, error) {
	if owner == "" {
		return true, nil
	}
	if err := o.learn(ctx, []string{owner}); err != nil {
		return false, err
	}
	return o.gone[owner], nil
}

func handOverOutcome(owner string) string {
	if owner == "" {
		return outcomeBeforeSignIn
	}
	return outcomeUserRemoved
}

// handOverAccounts makes to the owner of the accounts of gone owners. It
// looks up their owners together with the workspaces' (read before).
func (s *Service) handOverAccounts(ctx context.Context, to string, o *orphans, workspaceOwners []string) (int, error) {
	s.accountMu.Lock()
	defer s.accountMu.Unlock()
	all, err := s.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return 0, err
	}
	owners := slices.Clone(workspaceOwners)
	for _, acct := range all {
		owners = append(owners, acct.Owner)
	}
	if err := o.learn(ctx, slices.DeleteFunc(owners, func(owner string) bool { return owner == to })); err != nil {
		return 0, err
	}
	n := 0
	for _, acct := range all {
		if acct.Owner == to {
			continue
		}
		if acct.Owner != "" && !o.gone[acct.Owner] {
			continue
		}
		from := acct.Owner
		acct.Owner = to
		if err := s.cfg.Store.PutAccount(ctx, acct); err != nil {
			return n, fmt.Errorf("hand over account %s: %w", acct.ID, err)
		}
		n++
		s.audit(ctx, AuditEntry{Owner: to, Actor: ActorHandOver, Action: AuditHandOver,
			AccountID: acct.ID, Provider: acct.Provider, Outcome: handOverOutcome(from)})
	}
	return n, nil
}

type handOverResult int

const (
	handedOver handOverResult = iota
	stayedBusy
	notOrphaned // its owner exists, or it is gone
)

// handOverWorkspace makes to the owner of one orphaned workspace and its
// export records, under the workspace's lock; it returns how many export
// records changed.
func (s *Service) handOverWorkspace(ctx context.Context, id, to string, o *orphans) (handOverResult, int, error) {
	h, ok := s.locks.lockWithinRead(id, lockWait)
	if !ok {
		return stayedBusy, 0, nil
	}
	ws, found, err := s.freshHeld(ctx, id, h)
	if err != nil || !found || ws.Owner == to {
		h.unlock()
		return notOrphaned, 0, err
	}
	if orphan, err := o.orphaned(ctx, ws.Owner); err != nil || !orphan {
		h.unlock()
		return notOrphaned, 0, err
	}
	from := ws.Owner
	// The exports first: should the save fail, the next call finds the
	// workspace still orphaned and its exports already given.
	exports, err := s.handOverExports(ctx, id, from, to)
	if err != nil {
		h.unlock()
		return notOrphaned, exports, fmt.Errorf("its export records: %w", err)
	}
	ws.Owner = to
	if ws, err = s.saveUnlocking(ctx, ws, h); err != nil {
		return notOrphaned, exports, err
	}
	s.audit(ctx, AuditEntry{Owner: to, Actor: ActorHandOver, Action: AuditHandOver,
		WorkspaceID: ws.ID, AccountID: ws.AccountID, Provider: ws.Provider, Outcome: handOverOutcome(from)})
	return handedOver, exports, nil
}

func (s *Service) handOverExports(ctx context.Context, workspaceID, from, to string) (int, error) {
	store := s.exportStore()
	if store == nil {
		return 0, nil
	}
	return store.GiveExports(ctx, workspaceID, from, to)
}
