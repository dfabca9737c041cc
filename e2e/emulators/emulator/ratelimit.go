package emulator

import (
	"sync"
	"time"
)

// Window is a fixed-window request counter on the emulated clock: Limit
// requests per Period, the window starting at the first request after the
// previous one ended. Safe for concurrent use.
type Window struct {
	Limit  int
	Period time.Duration

	mu    sync.Mutex
	start time.Time
	used  int
}

// Hit counts one request at now. It reports the requests left in the
// window, when the window resets, and whether the request fits; a request
// that does not fit is not counted.
func (w *Window) Hit(now time.Time) (remaining int, reset time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(now)
	if w.used >= w.Limit {
		return 0, w.start.Add(w.Period), false
	}
	w.used++
	return w.Limit - w.used, w.start.Add(w.Period), true
}

// Peek reports the state of the window at now without counting.
func (w *Window) Peek(now time.Time) (remaining int, reset time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(now)
	return max(w.Limit-w.used, 0), w.start.Add(w.Period)
}

func (w *Window) roll(now time.Time) {
	if w.start.IsZero() || !now.Before(w.start.Add(w.Period)) || now.Before(w.start) {
		w.start, w.used = now, 0
	}
}

// SecondsUntil returns the whole seconds from now to t, rounded up and at
// least zero: the form Retry-After and reset headers take.
func SecondsUntil(now, t time.Time) int {
	d := t.Sub(now)
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

// Seconds renders d as whole seconds rounded up, at least 1: Retry-After.
func Seconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}
