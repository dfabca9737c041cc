package core

import (
	"context"
	"fmt"
)

// The audit trail names a hand-over (HandOverUnowned) so: action, actor
// (companion does it on its own when sign-in is on) and outcome.
const (
	AuditHandOver   = "handover"
	ActorHandOver   = "sign-in hand-over"
	handOverOutcome = "ok (made before sign-in was turned on)"
)

// HandOver counts what HandOverUnowned gave away.
type HandOver struct {
	Accounts, Workspaces, Exports int
	// Busy lists workspaces whose lock stayed taken; the next call takes
	// them.
	Busy []string
}

// HandOverUnowned gives to the user to every account, workspace and
// export record whose owner is "": what desktop mode or serve without a
// sign-in method made. Once serve has users nobody is "", so without a
// hand-over those would be seen by nobody while their boxes kept running.
// Each workspace changes under its lock and reaches the stream as an
// upsert; each change is audited under its new owner. Calling it again
// is a no-op, and a workspace that stays busy for the lock's wait is left
// for the next call (reported in Busy). The service must be loaded.
func (s *Service) HandOverUnowned(ctx context.Context, to string) (HandOver, error) {
	var n HandOver
	if to == "" {
		return n, Errorf(KindInvalid, "hand-over needs a user to give to")
	}
	accounts, err := s.handOverAccounts(ctx, to)
	n.Accounts = accounts
	if err != nil {
		return n, err
	}
	for _, id := range s.feed.idsOwnedBy("") {
		res, exports, err := s.handOverWorkspace(ctx, id, to)
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

func (s *Service) handOverAccounts(ctx context.Context, to string) (int, error) {
	s.accountMu.Lock()
	defer s.accountMu.Unlock()
	all, err := s.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, acct := range all {
		if acct.Owner != "" {
			continue
		}
		acct.Owner = to
		if err := s.cfg.Store.PutAccount(ctx, acct); err != nil {
			return n, fmt.Errorf("hand over account %s: %w", acct.ID, err)
		}
		n++
		s.audit(ctx, AuditEntry{Owner: to, Actor: ActorHandOver, Action: AuditHandOver,
			AccountID: acct.ID, Provider: acct.Provider, Outcome: handOverOutcome})
	}
	return n, nil
}

type handOverResult int

const (
	handedOver handOverResult = iota
	stayedBusy
	notUnowned // gone, or handed over by another replica meanwhile
)

// handOverWorkspace gives one workspace and its export records to to,
// under the workspace's lock; it returns how many export records changed.
func (s *Service) handOverWorkspace(ctx context.Context, id, to string) (handOverResult, int, error) {
	h, ok := s.locks.lockWithinRead(id, lockWait)
	if !ok {
		return stayedBusy, 0, nil
	}
	ws, found, err := s.freshHeld(ctx, id, h)
	if err != nil || !found || ws.Owner != "" {
		h.unlock()
		return notUnowned, 0, err
	}
	// The exports first: should the save fail, the next call finds the
	// workspace still unowned and its exports already given.
	exports, err := s.handOverExports(ctx, id, to)
	if err != nil {
		h.unlock()
		return notUnowned, exports, fmt.Errorf("its export records: %w", err)
	}
	ws.Owner = to
	if ws, err = s.saveUnlocking(ctx, ws, h); err != nil {
		return notUnowned, exports, err
	}
	s.audit(ctx, AuditEntry{Owner: to, Actor: ActorHandOver, Action: AuditHandOver,
		WorkspaceID: ws.ID, AccountID: ws.AccountID, Provider: ws.Provider, Outcome: handOverOutcome})
	return handedOver, exports, nil
}

func (s *Service) handOverExports(ctx context.Context, workspaceID, to string) (int, error) {
	store := s.exportStore()
	if store == nil {
		return 0, nil
	}
	return store.GiveExports(ctx, workspaceID, "", to)
}
