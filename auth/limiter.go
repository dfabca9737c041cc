package auth

import (
	"strings"
	"sync"
	"time"
)

// Limits are the failed-login limits. Each counts failures in a fixed
// window that starts at the first failure; a key over its limit is refused
// until its window ends. A success clears the (user, address) count.
//
// The three limits together:
//   - PerUserAddr (strict): one address guessing one user's password.
//   - PerAddr: one address spraying many user names.
//   - PerUser (loose, short window): many addresses guessing one user.
//     It never applies to an address the user has signed in from before
//     (see KnownFor), and its window is short, so an attacker cannot keep
//     a user out from their usual address, nor for long from a new one.
type Limits struct {
	PerUserAddr, PerAddr, PerUser int
	UserAddrWindow, AddrWindow    time.Duration
	UserWindow                    time.Duration
	// KnownFor is how long a successful sign-in marks an address as
	// known for that user.
	KnownFor time.Duration
}

// DefaultLimits: 5 guesses per user per address per 15 minutes, 30 per
// address per 15 minutes, 60 per user per minute from unknown addresses.
var DefaultLimits = Limits{
	PerUserAddr: 5, UserAddrWindow: 15 * time.Minute,
	PerAddr: 30, AddrWindow: 15 * time.Minute,
	PerUser: 60, UserWindow: time.Minute,
	KnownFor: 30 * 24 * time.Hour,
}

// maxLimiterKeys bounds the limiter's memory; past it expired entries are
// dropped, and if that is not enough the oldest half is.
const maxLimiterKeys = 100_000

type window struct {
	start time.Time
	n     int
}

// limiter counts failed logins in memory. It is per process: a restart
// forgets the counts, which costs an attacker a restart they cannot cause.
type limiter struct {
	lim   Limits
	mu    sync.Mutex
	fails map[string]*window   // "ua|user|addr", "a|addr", "u|user"
	known map[string]time.Time // "user|addr" → known until
}

func newLimiter(l Limits) *limiter {
	return &limiter{lim: l, fails: map[string]*window{}, known: map[string]time.Time{}}
}

func userKey(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// blocked reports how long (user, addr) must wait before a new attempt;
// 0 means it may try now.
func (l *limiter) blocked(now time.Time, user, addr string) time.Duration {
	user = userKey(user)
	l.mu.Lock()
	defer l.mu.Unlock()
	wait := l.over(now, "ua|"+user+"|"+addr, l.lim.PerUserAddr, l.lim.UserAddrWindow)
	wait = max(wait, l.over(now, "a|"+addr, l.lim.PerAddr, l.lim.AddrWindow))
	if until, ok := l.known[user+"|"+addr]; !ok || now.After(until) {
		wait = max(wait, l.over(now, "u|"+user, l.lim.PerUser, l.lim.UserWindow))
	}
	return wait
}

func (l *limiter) over(now time.Time, key string, limit int, win time.Duration) time.Duration {
	w := l.fails[key]
	if w == nil || limit <= 0 || now.Sub(w.start) >= win || w.n < limit {
		return 0
	}
	return w.start.Add(win).Sub(now)
}

// fail records a failed attempt.
func (l *limiter) fail(now time.Time, user, addr string) {
	user = userKey(user)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prune(now)
	l.bump(now, "ua|"+user+"|"+addr, l.lim.UserAddrWindow)
	l.bump(now, "a|"+addr, l.lim.AddrWindow)
	if until, ok := l.known[user+"|"+addr]; !ok || now.After(until) {
		l.bump(now, "u|"+user, l.lim.UserWindow)
	}
}

func (l *limiter) bump(now time.Time, key string, win time.Duration) {
	w := l.fails[key]
	if w == nil || now.Sub(w.start) >= win {
		w = &window{start: now}
		l.fails[key] = w
	}
	w.n++
}

// succeed clears the (user, address) count and marks the address known.
func (l *limiter) succeed(now time.Time, user, addr string) {
	user = userKey(user)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.fails, "ua|"+user+"|"+addr)
	l.known[user+"|"+addr] = now.Add(l.lim.KnownFor)
}

func (l *limiter) prune(now time.Time) {
	if len(l.fails) < maxLimiterKeys && len(l.known) < maxLimiterKeys {
		return
	}
	longest := max(l.lim.UserAddrWindow, l.lim.AddrWindow, l.lim.UserWindow)
	for k, w := range l.fails {
		if now.Sub(w.start) >= longest {
			delete(l.fails, k)
		}
	}
	for k, until := range l.known {
		if now.After(until) {
			delete(l.known, k)
		}
	}
	// Still full (a flood of fresh keys): forget arbitrary entries rather
	// than grow without bound.
	for k := range l.fails {
		if len(l.fails) < maxLimiterKeys/2 {
			break
		}
		delete(l.fails, k)
	}
	for k := range l.known {
		if len(l.known) < maxLimiterKeys/2 {
			break
		}
		delete(l.known, k)
	}
}
