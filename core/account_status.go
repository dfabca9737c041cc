package core

import (
	"context"
	"sync"
	"time"
)

// AccountState is how the reconciler's last look at an account went.
type AccountState string

const (
	// AccountChecking: the account was just added and its first list is
	// still running.
	AccountChecking AccountState = "checking"
	// AccountOK: the last list succeeded.
	AccountOK AccountState = "ok"
	// AccountFailing: the last list failed; the reconciler backs off and
	// tries again at NextAttemptAt.
	AccountFailing AccountState = "failing"
)

// FlagInventingBoxes is raised on an account whose provider lists many
// boxes it never listed before, pass after pass. Adoption stops for that
// account while the flag is up; known workspaces are still kept current.
const FlagInventingBoxes = "inventing_boxes"

// AccountFlag is a problem the reconciler found with an account that needs
// a person's attention. It survives restarts.
type AccountFlag struct {
	Code    string
	Message string
	Since   time.Time
}

// AccountStatus is what companion knows of an account's provider right
// now. Only Flag survives a restart; the rest is rebuilt by the next pass.
type AccountStatus struct {
	State AccountState
	// Kind and Message describe the last failure (AccountFailing) or the
	// outcome of the first list of a new account.
	Kind    ErrorKind
	Message string
	// LastOKAt is when a list last succeeded; zero if never since start.
	LastOKAt time.Time
	// NextAttemptAt is when a failing account is tried again.
	NextAttemptAt time.Time
	Flag          *AccountFlag
}

// SharedAccountStatus keeps each account's status in a store shared by
// several replicas: only the replica holding an account's lease lists it,
// and the others show what it found. The PostgreSQL store implements it.
// PutAccountStatus does not record Flag (flags have their own table).
type SharedAccountStatus interface {
	PutAccountStatus(ctx context.Context, accountID string, st AccountStatus) error
	// AccountStatusShared reports false when no replica recorded one. Its
	// Flag is the account's flag as stored now.
	AccountStatusShared(ctx context.Context, accountID string) (AccountStatus, bool, error)
}

// shareStatus records this process's status of an account for the other
// replicas, after a pass over it.
func (s *Service) shareStatus(ctx context.Context, id string) {
	sh := s.rep.statuses
	if sh == nil {
		return
	}
	if err := sh.PutAccountStatus(ctx, id, s.status.get(id)); err != nil && ctx.Err() == nil {
		s.log.Warn("could not share an account's status with the other replicas", "account", id, "err", err)
	}
}

// followStatus takes over the status another replica recorded for an
// account it lists, telling this process's subscribers of a change.
func (s *Service) followStatus(ctx context.Context, acct Account) {
	sh := s.rep.statuses
	if sh == nil {
		return
	}
	got, ok, err := sh.AccountStatusShared(ctx, acct.ID)
	if err != nil || !ok {
		return
	}
	// The holder may have raised or cleared the flag since this process
	// read the flags at start; it also gates adoption here on a takeover.
	s.updateStatus(acct, func(st *AccountStatus) {
		st.State, st.Kind, st.Message, st.LastOKAt, st.NextAttemptAt = got.State, got.Kind, got.Message, got.LastOKAt, got.NextAttemptAt
		st.Flag = got.Flag
	}, statusFollowed)
}

// AccountEvent tells subscribers that an account's status changed.
type AccountEvent struct {
	Account Account
	Status  AccountStatus
}

// accountStatuses holds every account's status and the reconciler's
// per-account memory (what the last list held, for spotting invention).
type accountStatuses struct {
	mu   sync.Mutex
	m    map[string]*acctTrack
	subs map[chan AccountEvent]struct{}
}

type acctTrack struct {
	status AccountStatus
	told   bool // status was set since start (see setStatus)
	busy   bool // a pass (or the first list of a new account) is running

	listed map[string]bool // box ids of the last successful list; nil before one
	streak int             // consecutive passes with many never-seen ids
	calm   int             // consecutive calm passes while flagged
}

func newAccountStatuses() *accountStatuses {
	return &accountStatuses{m: map[string]*acctTrack{}, subs: map[chan AccountEvent]struct{}{}}
}

func (a *accountStatuses) trackLocked(id string) *acctTrack {
	t := a.m[id]
	if t == nil {
		t = &acctTrack{status: AccountStatus{State: AccountChecking}}
		a.m[id] = t
	}
	return t
}

// tryBusy marks an account's pass as running, unless one already is.
func (a *accountStatuses) tryBusy(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.trackLocked(id)
	if t.busy {
		return false
	}
	t.busy = true
	return true
}

func (a *accountStatuses) done(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.m[id]; t != nil {
		t.busy = false
	}
}

func (a *accountStatuses) get(id string) AccountStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.m[id]
	if t == nil {
		return AccountStatus{State: AccountChecking}
	}
	return t.status.clone()
}

// clone copies st with a flag of its own.
func (st AccountStatus) clone() AccountStatus {
	if st.Flag != nil {
		f := *st.Flag
		st.Flag = &f
	}
	return st
}

func (a *accountStatuses) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, id)
}

// AccountStatus returns the reconciler's view of one of owner's accounts.
func (s *Service) AccountStatus(ctx context.Context, owner, id string) (AccountStatus, error) {
	if _, err := s.Account(ctx, owner, id); err != nil {
		return AccountStatus{}, err
	}
	return s.status.get(id), nil
}

// AccountStatusOf returns the status of an account already known to belong
// to the caller (from Accounts).
func (s *Service) AccountStatusOf(id string) AccountStatus { return s.status.get(id) }

// SubscribeAccounts delivers an AccountEvent whenever an account's state,
// message or flag changes. A subscriber that does not keep up with buffer
// events misses some; GET /v1/accounts stays authoritative. Call the
// returned function to stop.
func (s *Service) SubscribeAccounts(buffer int) (<-chan AccountEvent, func()) {
	ch := make(chan AccountEvent, buffer)
	a := s.status
	a.mu.Lock()
	a.subs[ch] = struct{}{}
	a.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			a.mu.Lock()
			delete(a.subs, ch)
			a.mu.Unlock()
		})
	}
}

// statusSource is where a change of an account's status comes from.
type statusSource int

const (
	statusOwn      statusSource = iota // this process's reconciler found it
	statusFollowed                     // read from the status another replica shared
	statusRelayed                      // announced by another replica, relayed
)

// setStatus changes an account's status with f and tells subscribers if
// anything a person would see changed. The first good pass over an
// account after a start tells nothing new (it was fine before, as far as
// anyone knows) and is not announced.
func (s *Service) setStatus(acct Account, f func(st *AccountStatus)) {
	s.updateStatus(acct, f, statusOwn)
}

// updateStatus is setStatus for a change from src. What this process's
// reconciler announces is relayed to the other replicas' streams (on a
// shared store); what another replica announced is announced here too,
// unless this process already told its subscribers the same, and is not
// relayed again.
func (s *Service) updateStatus(acct Account, f func(st *AccountStatus), src statusSource) {
	if e := s.updateStatusLocked(acct, f, src); e != nil {
		s.emit(s.bg, *e)
	}
}

// updateStatusLocked is updateStatus under the statuses' lock. It returns
// the account.unhealthy event to emit (outside the lock) when this
// process's own pass saw the account start failing.
func (s *Service) updateStatusLocked(acct Account, f func(st *AccountStatus), src statusSource) *Event {
	a := s.status
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.trackLocked(acct.ID)
	before := t.status
	f(&t.status)
	after := t.status
	quiet := !t.told && after.State == AccountOK && sameFlag(before.Flag, after.Flag) && src != statusRelayed
	t.told = true
	if quiet {
		return nil
	}
	if before.State == after.State && before.Kind == after.Kind && before.Message == after.Message && sameFlag(before.Flag, after.Flag) {
		return nil
	}
	if src == statusOwn {
		s.relay(Relayed{Kind: RelayAccount, AccountID: acct.ID, Status: after.clone()})
	}
	ev := AccountEvent{Account: acct, Status: after}
	for ch := range a.subs {
		select {
		case ch <- ev:
		default:
		}
	}
	if src != statusOwn || after.State != AccountFailing || before.State == AccountFailing {
		return nil
	}
	// One event per spell of failing. Two processes may each see the
	// same spell start (the replica that added the account and the one
	// holding its lease): the id names the account, what failed and the
	// hour, so those collapse into one, and a new spell an hour on is
	// news again.
	at := s.now()
	return &Event{ID: EventID(EventAccountUnhealthy, acct.ID, string(after.Kind), after.Message, at.UTC().Truncate(time.Hour).Format(time.RFC3339)),
		Kind: EventAccountUnhealthy, At: at,
		Owner: acct.Owner, AccountID: acct.ID, AccountShared: acct.Shared, Provider: acct.Provider,
		NextAttemptAt: after.NextAttemptAt, Reason: after.Message}
}

func sameFlag(a, b *AccountFlag) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// loadFlags restores the flags raised before a restart.
func (s *Service) loadFlags(ctx context.Context) error {
	flags, err := s.cfg.Store.AccountFlags(ctx)
	if err != nil {
		return err
	}
	a := s.status
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, f := range flags {
		f := f
		a.trackLocked(id).status.Flag = &f
	}
	return nil
}
