// Package fakeclock is a clock for tests that moves only when advanced.
package fakeclock

import (
	"sort"
	"sync"
	"time"
)

// Clock moves only when a test advances it. It satisfies core.Clock (whose
// Timer is an alias of Timer's shape) without importing core, so core's own
// tests can use it too.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced when timers are added
}

// New returns a clock reading start.
func New(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock is advanced to d from
// now. The return type is an interface with C and Stop, matching
// core.Timer.
func (c *Clock) NewTimer(d time.Duration) interface {
	C() <-chan time.Time
	Stop() bool
} {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clock: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.fired = true
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

// Advance moves the clock forward by d, firing every timer that falls due,
// in order of their deadlines.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	keep := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			keep = append(keep, t)
			continue
		}
		t.fired = true
		t.ch <- t.at
	}
	clear(c.timers[len(keep):])
	c.timers = keep
}

// Waiters is how many timers are pending.
func (c *Clock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForWaiters blocks until at least n timers are pending or timeout (of
// real time, a guard against a hung test) passes; it reports which.
func (c *Clock) WaitForWaiters(n int, timeout time.Duration) bool {
	guard := time.NewTimer(timeout)
	defer guard.Stop()
	for {
		c.mu.Lock()
		got, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-ch:
		case <-guard.C:
			return false
		}
	}
}

// NextDeadline is the earliest pending timer's deadline, if any.
func (c *Clock) NextDeadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for _, t := range c.timers {
		if next.IsZero() || t.at.Before(next) {
			next = t.at
		}
	}
	return next, !next.IsZero()
}

type fakeTimer struct {
	clock *Clock
	at    time.Time
	ch    chan time.Time
	fired bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.fired {
		return false
	}
	for i, o := range c.timers {
		if o == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			break
		}
	}
	t.fired = true
	return true
}
