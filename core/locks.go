package core

import "sync"

// locks is a set of per-workspace locks. Actions hold a workspace's lock for
// their whole run (including the part that continues in the background);
// the reconciler only tries it and skips a busy workspace.
type locks struct {
	mu   sync.Mutex
	held map[string]bool
}

// tryLock takes id's lock if it is free and returns its release function.
func (l *locks) tryLock(id string) (unlock func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[string]bool{}
	}
	if l.held[id] {
		return nil, false
	}
	l.held[id] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.held, id)
			l.mu.Unlock()
		})
	}, true
}
