package core

import (
	"sync"
	"time"
)

// locks is a set of per-workspace locks. Actions hold a workspace's lock for
// their whole run (including the part that continues in the background);
// the reconciler only tries it and skips a busy workspace.
type locks struct {
	clock Clock // nil means the system clock
	mu    sync.Mutex
	held  map[string]chan struct{} // closed when released
	// shared, when set, adds the store's lease to every lock, so the lock
	// holds across processes sharing the store (see leases.go).
	shared *sharedLocks
}

// tryLock takes id's lock if it is free and returns its release function.
func (l *locks) tryLock(id string) (unlock func(), ok bool) {
	h, _, ok := l.tryAll(id, false)
	if !ok {
		return nil, false
	}
	return h.unlock, true
}

func (l *locks) try(id string) (unlock func(), released <-chan struct{}, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[string]chan struct{}{}
	}
	if ch, busy := l.held[id]; busy {
		return nil, ch, false
	}
	ch := make(chan struct{})
	l.held[id] = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.held, id)
			l.mu.Unlock()
			close(ch)
		})
	}, nil, true
}

// heldHere reports whether this process holds id's lock, and if so the
// channel closed when it is released.
func (l *locks) heldHere(id string) (released <-chan struct{}, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch, ok := l.held[id]
	return ch, ok
}

// lockWithin takes id's lock, waiting at most d for its holder to release
// it. An action publishes its outcome just before it releases the lock, so
// a person reacting at once to "paused" should not be told "busy".
func (l *locks) lockWithin(id string, d time.Duration) (unlock func(), ok bool) {
	h, ok := l.lockWithinHeld(id, d, false)
	if !ok {
		return nil, false
	}
	return h.unlock, true
}

// lockWithinRead is lockWithin for an action that re-reads the workspace
// under its lock: on a shared store the read comes with the lease, in one
// round trip (held.read, for Service.freshHeld).
func (l *locks) lockWithinRead(id string, d time.Duration) (h *held, ok bool) {
	return l.lockWithinHeld(id, d, true)
}

func (l *locks) lockWithinHeld(id string, d time.Duration, read bool) (*held, bool) {
	c := l.clock
	if c == nil {
		c = RealClock{}
	}
	deadline := c.NewTimer(d)
	defer deadline.Stop()
	for {
		h, released, ok := l.tryAll(id, read)
		if ok {
			return h, true
		}
		select {
		case <-released:
		case <-deadline.C():
			return nil, false
		}
	}
}
