package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"
	"time"
)

// Limits are the failed-login limits. Each counts failures in a fixed
// window that starts at the first failure; a key over its limit is refused
// until its window ends. A success clears the (user, address) count.
//
// The three limits together:
//   - PerUserAddr (strict): one address guessing one user's password.
//   - PerAddr: one address spraying many user names, made-up ones
//     included. It never applies to a user signing in from an address
//     they have signed in from before (see KnownFor), so somebody who
//     shares a user's address (an office NAT, or every client when an
//     ingress is not configured with --trusted-proxy) cannot keep them
//     out by failing with other names.
//   - PerUser (loose, short window): many addresses guessing one user.
//     It never applies to an address the user has signed in from before
//     (see KnownFor), and its window is short, so an attacker cannot keep
//     a user out from their usual address, nor for long from a new one.
//
// Every key is per name or per address, never global: a failure counts
// against the name tried (an unknown name's keys are nobody's) and the
// address it came from, so failures with made-up names can refuse only
// that address, and only for names not known there. An address is the
// client's (Ingress.ClientAddr), an IPv6 one counted by its /64, which
// one host or home network usually holds whole.
type Limits struct {
	PerUserAddr, PerAddr, PerUser int
	UserAddrWindow, AddrWindow    time.Duration
	UserWindow                    time.Duration
	// KnownFor is how long a successful sign-in marks an address as
	// known for that user.
	KnownFor time.Duration
}

// DefaultLimits: 5 guesses per user per address per 15 minutes; 30 per
// address per 15 minutes, for names not known at that address; 60 per
// user per minute from addresses not known for that user. Known means
// signed in from there in the last 30 days.
var DefaultLimits = Limits{
	PerUserAddr: 5, UserAddrWindow: 15 * time.Minute,
	PerAddr: 30, AddrWindow: 15 * time.Minute,
	PerUser: 60, UserWindow: time.Minute,
	KnownFor: 30 * 24 * time.Hour,
}

// FailureKey is one limit's key and the length of its window.
type FailureKey struct {
	Key    string
	Window time.Duration
}

// FailureWindow is a key's open window: N failures counted in the window
// that ends at Ends.
type FailureWindow struct {
	N    int
	Ends time.Time
}

// maxKeyLen bounds a stored key; a longer one (a huge user name) is kept
// as its hash.
const maxKeyLen = 200

// limiter applies Limits to the counts the store keeps, so every process
// on one database shares them: a guesser gains nothing by switching
// replicas or waiting for a restart.
type limiter struct {
	lim   Limits
	store Store
}

func userKey(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// addrKey is the address a limit counts: an IPv6 address's /64 (one
// host can pick any address in it), any other as it is.
func addrKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	if a = a.Unmap().WithZone(""); a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

func limitKey(k string) string {
	if len(k) <= maxKeyLen {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "h|" + hex.EncodeToString(sum[:])
}

// limitKeys are the keys of the three limits and of the known address.
type limitKeys struct{ userAddr, addr, user, known string }

func keysFor(user, addr string) limitKeys {
	user, addr = userKey(user), addrKey(addr)
	return limitKeys{userAddr: limitKey("ua|" + user + "|" + addr), addr: limitKey("a|" + addr),
		user: limitKey("u|" + user), known: limitKey(user + "|" + addr)}
}

// blocked reports how long (user, addr) must wait before a new attempt (0:
// it may try now) and whether addr is known for user.
func (l *limiter) blocked(ctx context.Context, now time.Time, k limitKeys) (time.Duration, bool, error) {
	open, until, err := l.store.LoginFailures(ctx, now, []string{k.userAddr, k.addr, k.user}, k.known)
	if err != nil {
		return 0, false, err
	}
	known := !until.IsZero() && !now.After(until)
	wait := over(now, open[k.userAddr], l.lim.PerUserAddr)
	if !known {
		wait = max(wait, over(now, open[k.addr], l.lim.PerAddr))
		wait = max(wait, over(now, open[k.user], l.lim.PerUser))
	}
	return wait, known, nil
}

func over(now time.Time, w FailureWindow, limit int) time.Duration {
	if limit <= 0 || w.N < limit || !now.Before(w.Ends) {
		return 0
	}
	return w.Ends.Sub(now)
}

// fail records a failed attempt; known is what blocked said of addr.
func (l *limiter) fail(ctx context.Context, now time.Time, k limitKeys, known bool) error {
	keys := []FailureKey{{k.userAddr, l.lim.UserAddrWindow}, {k.addr, l.lim.AddrWindow}}
	if !known {
		keys = append(keys, FailureKey{k.user, l.lim.UserWindow})
	}
	return l.store.AddLoginFailure(ctx, now, keys)
}

// succeed clears the (user, address) count and marks the address known.
func (l *limiter) succeed(ctx context.Context, now time.Time, k limitKeys) error {
	return l.store.LoginSucceeded(ctx, now, k.userAddr, k.known, now.Add(l.lim.KnownFor))
}
