package webhooks

import (
	"math/rand/v2"
	"time"
)

// Backoff is the wait after a failed attempt: min doubled per attempt,
// capped at max, then jittered down by up to a half so that deliveries
// that failed together (a receiver's outage) do not all come back at once.
type Backoff struct {
	Min, Max time.Duration
	// Rand returns a number in [0, 1); nil means math/rand.
	Rand func() float64
}

// After returns the wait after attempt (1 for the first) failed.
func (b Backoff) After(attempt int) time.Duration {
	d := b.Min
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	r := b.Rand
	if r == nil {
		r = rand.Float64
	}
	return d - time.Duration(float64(d/2)*r())
}
