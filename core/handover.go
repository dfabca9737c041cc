package core

import (
	"context"
	"fmt"
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

// OwnerExists reports whether the user an owner id names still exists.
type OwnerExists func(ctx context.Context, owner string) (bool, error)

// HandOverOrphans gives to the user to every account, workspace and
// export record whose owner is nobody: "" (what desktop mode or serve
// without a sign-in method made) or a user exists says is gone. Without a
// hand-over they would be seen by nobody while their boxes kept running.
//
// An owner is checked after what it owns was read (under the workspace's
// lock), and user ids are never reused, so a user made meanwhile (on
// another replica) never loses what they just made. Each workspace
// changes under its lock and reaches the stream as an upsert; each change
// is audited under its new owner. Calling it again is a no-op, and a
// workspace that stays busy for the lock's wait is left for the next call
// (reported in Busy). The service must be loaded.
func (s *Service) HandOverOrphans(ctx context.Context, to string, exists OwnerExists) (HandOver, error) {
	var n HandOver
	if to == "" {
		return n, Errorf(KindInvalid, "hand-over needs a user to give to")
	}
	o := &orphans{exists: exists, gone: map[string]bool{}}
	accounts, err := s.handOverAccounts(ctx, to, o)
	n.Accounts = accounts
	if err != nil {
		return n, err
	}
	// Owners first (few), then the workspaces of those gone (rarely any),
	// so that a start with nothing to hand over locks nothing.
	for _, owner := range s.feed.owners() {
		if owner == to {
			continue
		}
		if _, err := o.orphaned(ctx, owner); err != nil {
			return n, err
		}
	}
	for _, id := range s.feed.idsOwnedBy(func(owner string) bool { return owner == "" || o.gone[owner] }) {
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

// orphans remembers the owners one hand-over found gone (a removed user
// stays removed) and asks for the others each time.
type orphans struct {
	exists OwnerExists
	gone   map[string]bool
}

func (o *orphans) orphaned(ctx context.Context, owner string) (bool, error) {
	if owner == "" || o.gone[owner] {
		return true, nil
	}
	ok, err := o.exists(ctx, owner)
	if err != nil {
		return false, fmt.Errorf("does user %s exist: %w", owner, err)
	}
	o.gone[owner] = !ok
	return !ok, nil
}

func handOverOutcome(owner string) string {
	if owner == "" {
		return outcomeBeforeSignIn
	}
	return outcomeUserRemoved
}

func (s *Service) handOverAccounts(ctx context.Context, to string, o *orphans) (int, error) {
	s.accountMu.Lock()
	defer s.accountMu.Unlock()
	all, err := s.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, acct := range all {
		if acct.Owner == to {
			continue
		}
		if orphan, err := o.orphaned(ctx, acct.Owner); err != nil || !orphan {
			if err != nil {
				return n, err
			}
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

// handOverWorkspace gives one orphaned workspace and its export records to
// to, under the workspace's lock; it returns how many export records
// changed.
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
