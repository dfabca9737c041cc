package core

import (
	"context"
	"time"
)

// StreamRelay carries the stream's messages that are not stored between
// the processes sharing a store (PostgreSQL), so that every replica's
// clients get them, not only the clients of the replica that made them:
// an action's progress line, retention notices and account statuses.
// SQLite has one process per data dir and does not implement it.
//
// Progress travels with its revision: SaveWorkspace announces a saved
// workspace's Progress along with the revision it was saved at (in the
// change notification itself), and every process, the saver included,
// receives it before that revision's notification. The other kinds are
// sent with RelayStream, and a process never receives its own.
type StreamRelay interface {
	// RelayStream sends m (a notice or an account status) to every other
	// process sharing the store.
	RelayStream(ctx context.Context, m Relayed) error
	// ReceiveStream makes fn receive every message relayed by another
	// process and every progress line announced with a revision, and a
	// RelayMissed after each (re)connection of the listener. Set it
	// before WatchChanges runs: fn is called on the listening connection
	// and must not block.
	ReceiveStream(fn func(Relayed))
}

// Kinds of relayed messages.
const (
	RelayProgress = "progress"
	RelayNotice   = "notice"
	RelayAccount  = "account"
	// RelayPolicy: account AccountID's retention policy changed in the
	// store; the receiver reads it from there (it is not in the message).
	RelayPolicy = "policy"
	// RelayMissed is not sent: the receiving side hands it to fn after
	// each (re)connection of its listener, when messages sent meanwhile
	// were missed.
	RelayMissed = "missed"
)

// Relayed is one stream message relayed between processes.
type Relayed struct {
	Kind string
	// RelayProgress: workspace WorkspaceID's progress line at revision
	// Rev (the store may have cut a long line short).
	Rev         int64
	WorkspaceID string
	Progress    string
	// RelayNotice: the notice as the sender published it.
	Notice Notice
	// RelayAccount: the status of account AccountID as the sender (the
	// replica listing the account) just announced it. RelayPolicy: the
	// account whose retention policy changed.
	AccountID string
	Status    AccountStatus
}

// Queue sizes of the relay: messages beyond them are dropped (and logged)
// rather than block the stream; GET /v1/accounts and the workspaces'
// delete_after stay authoritative, and progress is refreshed every second.
const (
	relayOutBuffer = 256
	relayInBuffer  = 1024
	relayTimeout   = 5 * time.Second
)

// relaying is the service's side of a StreamRelay: nil on a store only
// one process uses.
type relaying struct {
	relay StreamRelay
	out   chan Relayed // to send, in order
	in    chan Relayed // received notices and statuses, in order
}

// startRelay hooks the service to the store's relay, when it has one: the
// feed takes the progress lines, and two background loops send this
// process's notices and statuses and publish the other processes'.
func (s *Service) startRelay() {
	sr, ok := s.cfg.Store.(StreamRelay)
	if !ok {
		return
	}
	r := &relaying{relay: sr, out: make(chan Relayed, relayOutBuffer), in: make(chan Relayed, relayInBuffer)}
	s.relaying = r
	sr.ReceiveStream(func(m Relayed) {
		if m.Kind == RelayProgress {
			s.feed.noteProgress(m.Rev, m.WorkspaceID, m.Progress)
			return
		}
		select {
		case r.in <- m:
		default:
			s.log.Warn("dropped a stream message relayed by another replica: too many waiting", "kind", m.Kind)
		}
	})
	s.goBackground(func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-r.out:
				cctx, cancel := context.WithTimeout(ctx, relayTimeout)
				err := r.relay.RelayStream(cctx, m)
				cancel()
				if err != nil && ctx.Err() == nil {
					s.log.Warn("could not relay a stream message to the other replicas; their clients miss it", "kind", m.Kind, "err", err)
				}
			}
		}
	})
	s.goBackground(func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-r.in:
				s.received(ctx, m)
			}
		}
	})
}

// relay sends m to the other replicas' streams, without waiting.
func (s *Service) relay(m Relayed) {
	r := s.relaying
	if r == nil {
		return
	}
	select {
	case r.out <- m:
	default:
		s.log.Warn("dropped a stream message meant for the other replicas: too many waiting", "kind", m.Kind)
	}
}

// received publishes a notice or an account status another replica
// relayed to this process's subscribers, as if it had made it.
func (s *Service) received(ctx context.Context, m Relayed) {
	switch m.Kind {
	case RelayNotice:
		s.ret.publish(m.Notice)
	case RelayPolicy:
		// Off this loop: a pass over the account's workspaces must not
		// hold up the notices and statuses behind it.
		s.goBackground(func(ctx context.Context) { s.policyAnnounced(ctx, m.AccountID) })
	case RelayMissed:
		// The listener (re)connected: a policy announced while it was
		// away (or between loading the policies and the first LISTEN)
		// was missed. Read them all again.
		if s.ret.store != nil {
			s.goBackground(func(ctx context.Context) {
				if err := s.reloadPolicies(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("could not read the retention policies again after the listener reconnected; the next retention tick does", "err", err)
				}
			})
		}
	case RelayAccount:
		if s.listsAccount(m.AccountID) {
			return // this replica lists it now: its own status is the newer
		}
		cctx, cancel := context.WithTimeout(ctx, relayTimeout)
		acct, err := s.cfg.Store.GetAccount(cctx, m.AccountID)
		cancel()
		if err != nil {
			if !IsKind(err, KindNotFound) && ctx.Err() == nil {
				s.log.Warn("could not read the account of a relayed status", "account", m.AccountID, "err", err)
			}
			return
		}
		st := m.Status
		s.updateStatus(acct, func(cur *AccountStatus) { *cur = st }, statusRelayed)
	}
}

// listsAccount reports whether this process holds the reconciler's lease
// of an account.
func (s *Service) listsAccount(id string) bool {
	r := s.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.leased[id]
	return ok
}
