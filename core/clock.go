package core

import (
	"context"
	"sync"
	"time"
)

// Clock is where core reads the time and waits. Every time read and every
// wait in core goes through it, so tests can drive time instead of
// sleeping (internal/testsupport has a fake one that tests advance).
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock. Stop prevents it from firing
// and reports whether it did. It is an alias of an interface literal so a
// test clock can implement Clock without importing core.
type Timer = interface {
	C() <-chan time.Time
	Stop() bool
}

// RealClock is the system clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// nowClock keeps Config.Now (a bare time source) working: reads come from
// it, waits use the system clock.
type nowClock struct{ now func() time.Time }

func (c nowClock) Now() time.Time                 { return c.now() }
func (c nowClock) NewTimer(d time.Duration) Timer { return RealClock{}.NewTimer(d) }

// sleep waits d on the service's clock; it returns false if ctx ended
// first.
func sleep(ctx context.Context, c Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// withClockTimeout is context.WithTimeout on c. On the real clock it is
// exactly context.WithTimeout.
func withClockTimeout(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := c.(RealClock); ok {
		return context.WithTimeout(parent, d)
	}
	ctx := &clockCtx{Context: parent, deadline: c.Now().Add(d), done: make(chan struct{})}
	t := c.NewTimer(d)
	stop := make(chan struct{})
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			ctx.end(context.DeadlineExceeded)
		case <-parent.Done():
			ctx.end(parent.Err())
		case <-stop:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() { close(stop) })
		ctx.end(context.Canceled)
	}
}

// clockCtx is a context whose deadline is kept by a Clock.
type clockCtx struct {
	context.Context
	deadline time.Time
	mu       sync.Mutex
	done     chan struct{}
	err      error
}

func (c *clockCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *clockCtx) Done() <-chan struct{}       { return c.done }

func (c *clockCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *clockCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}
