package core

import (
	"context"
	"sync"
	"time"
)

// WorkspaceLeases is a store's lock on a workspace that holds across every
// companion sharing the store, with a lease so that a holder that died
// blocks the workspace only until the lease lapses. The PostgreSQL store
// implements it; on SQLite one process owns the data dir, so the
// in-process lock is enough and the store does not.
type WorkspaceLeases interface {
	// TryLeaseWorkspace takes (or, for the same holder, renews) id's lease
	// for ttl and reports whether holder has it. When it does, rev is the
	// store's revision as of taking it: every change committed before is
	// at or below rev (0 when the store cannot tell). It comes in the same
	// round trip, so a holder whose feed is already there reads nothing
	// more.
	TryLeaseWorkspace(ctx context.Context, id, holder string, ttl time.Duration) (held bool, rev int64, err error)
	// ReleaseWorkspaceLease drops holder's lease of id.
	ReleaseWorkspaceLease(ctx context.Context, id, holder string) error
	// TryLeaseWorkspaceRead is TryLeaseWorkspace that also reads the
	// workspace, in the same round trip, as GetWorkspace would right after
	// the lease is taken: the read sees every change committed before the
	// lease was. It is how an action takes its lock and re-reads the
	// workspace under it.
	TryLeaseWorkspaceRead(ctx context.Context, id, holder string, ttl time.Duration) (LeaseRead, error)
	// SaveWorkspaceReleasing is SaveWorkspace that also drops holder's
	// lease of ws.ID in the save's own transaction: the lease ends when the
	// save commits, never before, and stays held if the save fails. It is
	// how an action whose last store work is a save ends.
	SaveWorkspaceReleasing(ctx context.Context, ws Workspace, holder string) (Workspace, error)
}

// LeaseRead is what TryLeaseWorkspaceRead returns: whether the lease is
// held and, when it is, the store's revision as TryLeaseWorkspace reports
// it and the workspace as stored (Found false when there is no such row;
// a removed workspace is Found, with Removed set).
type LeaseRead struct {
	Held      bool
	Rev       int64
	Found     bool
	Workspace Workspace
}

// Lease timings: a lease outlives a dead holder by at most its TTL
// (Config.LeaseTTL, leaseTTL by default); a live holder renews it every
// TTL/3; a replica waiting for another replica's lease retries every
// leaseRetry.
const (
	leaseTTL     = 30 * time.Second
	leaseRetry   = 100 * time.Millisecond
	leaseTimeout = 10 * time.Second // one store call
)

// sharedLocks are the store's leases as locks uses them.
type sharedLocks struct {
	leases WorkspaceLeases
	holder string // this process
	// sync, when set, brings this process's view of the workspaces up
	// to revision rev (the store's when the lease was taken) once a lease
	// is taken: the previous holder may have been another process whose
	// last writes are still on their way here.
	sync func(ctx context.Context, rev int64) error
	ttl  time.Duration
}

// held is a workspace's lock as this process holds it: the in-process
// lock and, on a store shared with other processes, the store's lease.
type held struct {
	// read is the workspace as the store had it when the lease was
	// taken, when it was asked for (lockWithinRead) on a shared store;
	// nil otherwise.
	read *LeaseRead
	// l and id are the lease's, nil and "" without one.
	l  *locks
	id string
	// stopRenew stops renewing the lease and waits for a renewal in
	// flight; leaseGone records that a save released it (saveUnlocking).
	stopRenew func()
	leaseGone bool
	local     func()
	once      sync.Once
}

// unlock lets go of the lock: it stops renewing the lease, releases it
// (unless a save already did) and then the in-process lock, so no other
// action of this process starts before the lease is gone.
func (h *held) unlock() {
	h.once.Do(func() {
		if h.l != nil {
			h.stopRenew()
			if !h.leaseGone {
				ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
				h.l.shared.leases.ReleaseWorkspaceLease(ctx, h.id, h.l.shared.holder) // else it lapses
				cancel()
			}
		}
		h.local()
	})
}

// tryAll takes id's in-process lock and then, when the store shares locks
// with other processes, its lease; with read, it reads the workspace from
// the store in the same round trip (held.read). A lease held elsewhere
// counts as busy; the released channel then closes after leaseRetry so
// lockWithin tries again.
func (l *locks) tryAll(id string, read bool) (h *held, released <-chan struct{}, ok bool) {
	local, released, ok := l.try(id)
	if !ok {
		return nil, released, false
	}
	if l.shared == nil {
		return &held{local: local}, nil, true
	}
	var (
		got bool
		rev int64
		err error
		lr  LeaseRead
	)
	ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
	if read {
		lr, err = l.shared.leases.TryLeaseWorkspaceRead(ctx, id, l.shared.holder, l.shared.ttl)
		got, rev = lr.Held, lr.Rev
	} else {
		got, rev, err = l.shared.leases.TryLeaseWorkspace(ctx, id, l.shared.holder, l.shared.ttl)
	}
	cancel()
	if err != nil || !got {
		local()
		return nil, l.after(leaseRetry), false
	}
	if l.shared.sync != nil {
		ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
		l.shared.sync(ctx, rev) // on failure the action meets the store's error itself
		cancel()
	}
	h = &held{l: l, id: id, stopRenew: l.renew(id), local: local}
	if read {
		h.read = &lr
	}
	return h, nil, true
}

// renew keeps id's lease alive until stop is called. stop waits for a
// renewal in flight, so that none lands after the lease's release and
// takes it again.
func (l *locks) renew(id string) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			// The lease lapses in the database's time, so renewals run on
			// the real clock whatever clock the service reads.
			t := RealClock{}.NewTimer(l.shared.ttl / 3)
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C():
			}
			ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
			l.shared.leases.TryLeaseWorkspace(ctx, id, l.shared.holder, l.shared.ttl)
			cancel()
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }); <-exited }
}

// after returns a channel closed d from now.
func (l *locks) after(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	t := l.clockOrReal().NewTimer(d)
	go func() { <-t.C(); close(ch) }()
	return ch
}

func (l *locks) clockOrReal() Clock {
	if l.clock == nil {
		return RealClock{}
	}
	return l.clock
}
