// Package emulator holds the machinery shared by the cloud-provider
// emulators under e2e/emulators: a controllable clock, fault injection, a
// request log that never records credential values, fixed-window rate-limit
// counters, and the admin routes that expose all of them over HTTP.
//
// Each provider package (daytona, e2b, digitalocean) builds its own API on
// top of a Base and speaks that provider's wire format; this package knows
// nothing about any provider's JSON.
package emulator

import (
	"sync"
	"time"
)

// Clock is the emulated time every state machine reads. It is either frozen
// (it moves only when Advance or Set is called, which makes tests
// deterministic) or running (wall time plus an offset that Advance and Set
// shift, which suits manual testing).
//
// A Clock is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	frozen bool
	now    time.Time     // frozen clocks
	offset time.Duration // running clocks
}

// NewFakeClock returns a frozen clock that reads start until moved.
func NewFakeClock(start time.Time) *Clock {
	return &Clock{frozen: true, now: start.UTC()}
}

// NewWallClock returns a running clock that follows real time; Advance and
// Set move it relative to real time.
func NewWallClock() *Clock {
	return &Clock{}
}

// Now returns the emulated time in UTC.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		return c.now
	}
	return time.Now().UTC().Add(c.offset)
}

// Advance moves the clock forward by d (backwards if d is negative) and
// returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		c.now = c.now.Add(d)
		return c.now
	}
	c.offset += d
	return time.Now().UTC().Add(c.offset)
}

// Set moves the clock to t. A running clock keeps running from t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		c.now = t.UTC()
		return
	}
	c.offset = time.Until(t)
}

// Frozen reports whether the clock moves only when told to.
func (c *Clock) Frozen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frozen
}
