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

// tryAll takes id's in-process lock and then, when the store shares locks
// with other processes, its lease. A lease held elsewhere counts as busy;
// the released channel then closes after leaseRetry so lockWithin tries
// again.
func (l *locks) tryAll(id string) (unlock func(), released <-chan struct{}, ok bool) {
	local, released, ok := l.try(id)
	if !ok || l.shared == nil {
		return local, released, ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
	got, rev, err := l.shared.leases.TryLeaseWorkspace(ctx, id, l.shared.holder, l.shared.ttl)
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
	stop := l.renew(id)
	var once sync.Once
	return func() {
		once.Do(func() {
			stop()
			ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
			l.shared.leases.ReleaseWorkspaceLease(ctx, id, l.shared.holder) // else it lapses
			cancel()
			local()
		})
	}, nil, true
}

// renew keeps id's lease alive until stop is called.
func (l *locks) renew(id string) (stop func()) {
	done := make(chan struct{})
	go func() {
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
	return func() { once.Do(func() { close(done) }) }
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
