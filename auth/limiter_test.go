package auth_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
)

// smallLimits are limits a test reaches quickly: 3 per (user, address)
// and perAddr per address per 15 minutes, perUser per user per minute.
func smallLimits(perAddr, perUser int) auth.Limits {
	return auth.Limits{PerUserAddr: 3, UserAddrWindow: 15 * time.Minute, PerAddr: perAddr, AddrWindow: 15 * time.Minute,
		PerUser: perUser, UserWindow: time.Minute, KnownFor: 24 * time.Hour}
}

// Failures with made-up user names never keep a real user out: they
// count against the sender's address, which refuses only that address,
// and there only names not known there. The sender is still limited.
func TestUnknownNamesDoNotLockOutUsers(t *testing.T) {
	svc, clk, _ := newService(t, smallLimits(10, 5))
	ctx := context.Background()
	for _, u := range []string{"alice", "bob"} {
		if _, err := svc.AddLocalUser(ctx, u, u+"-password", false); err != nil {
			t.Fatal(err)
		}
	}
	login := func(name, pw, addr string) error {
		_, _, err := svc.Login(ctx, name, pw, addr)
		return err
	}
	// Alice signs in from the office once: that address is known for her.
	if err := login("alice", "alice-password", "192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	// A sprayer elsewhere: every made-up name fails alike, then its
	// address is refused, for made-up and real names.
	for i := 0; i < 10; i++ {
		if err := login(fmt.Sprintf("nobody%d", i), "guess", "203.0.113.5"); !errors.Is(err, auth.ErrBadLogin) {
			t.Fatalf("made-up name %d: %v", i, err)
		}
	}
	for _, name := range []string{"nobody99", "bob"} {
		err := login(name, "guess", "203.0.113.5")
		var ce *core.Error
		if !errors.As(err, &ce) || ce.Kind != core.KindRateLimited || ce.RetryAfter <= 0 || ce.RetryAfter > 15*time.Minute {
			t.Fatalf("%s from the spraying address: %v, want rate limited with a retry-after of at most 15 min", name, err)
		}
	}
	// Real users elsewhere are untouched, from new and known addresses.
	if err := login("bob", "bob-password", "198.51.100.7"); err != nil {
		t.Fatalf("bob from another address: %v", err)
	}
	if err := login("alice", "alice-password", "192.0.2.10"); err != nil {
		t.Fatalf("alice from her office: %v", err)
	}
	// A sprayer sharing alice's office address (a NAT, or an ingress
	// without --trusted-proxy) fills that address's count ...
	for i := 0; i < 10; i++ {
		login(fmt.Sprintf("ghost%d", i), "guess", "192.0.2.10")
	}
	if err := login("ghost99", "guess", "192.0.2.10"); kindOf(err) != core.KindRateLimited {
		t.Fatalf("made-up name from the full address: %v, want rate limited", err)
	}
	// ... but alice, known there, still signs in; bob, new there, waits
	// for the window (the price of sharing an address with a sprayer).
	if err := login("alice", "alice-password", "192.0.2.10"); err != nil {
		t.Fatalf("alice from her office during a spray there: %v", err)
	}
	if err := login("bob", "bob-password", "192.0.2.10"); kindOf(err) != core.KindRateLimited {
		t.Fatalf("bob, new at the spraying address: %v, want rate limited", err)
	}
	clk.Advance(15 * time.Minute)
	if err := login("bob", "bob-password", "192.0.2.10"); err != nil {
		t.Fatalf("bob after the window: %v", err)
	}
}

// An unknown name and a real one are limited alike, so the limits do
// not tell which names exist.
func TestLimitsDoNotRevealNames(t *testing.T) {
	svc, _, _ := newService(t, smallLimits(100, 100))
	ctx := context.Background()
	svc.AddLocalUser(ctx, "alice", "alice-password", false)
	for _, name := range []string{"alice", "mallory"} {
		var errs []error
		for i := 0; i < 4; i++ {
			_, _, err := svc.Login(ctx, name, "guess", "203.0.113.5")
			errs = append(errs, err)
		}
		if !errors.Is(errs[2], auth.ErrBadLogin) || kindOf(errs[3]) != core.KindRateLimited {
			t.Fatalf("%s: %v, want three wrong-password answers, then rate limited", name, errs)
		}
	}
}

// An IPv6 client is counted by its /64: hopping within it gains nothing.
func TestIPv6CountedByPrefix(t *testing.T) {
	svc, _, _ := newService(t, smallLimits(10, 100))
	ctx := context.Background()
	svc.AddLocalUser(ctx, "alice", "alice-password", false)
	for i := 1; i <= 10; i++ {
		svc.Login(ctx, fmt.Sprintf("nobody%d", i), "guess", fmt.Sprintf("2001:db8:0:1::%x", i))
	}
	if _, _, err := svc.Login(ctx, "nobody", "guess", "2001:db8:0:1:ffff::1"); kindOf(err) != core.KindRateLimited {
		t.Fatalf("another address in the same /64: %v, want rate limited", err)
	}
	if _, _, err := svc.Login(ctx, "alice", "alice-password", "2001:db8:0:2::1"); err != nil {
		t.Fatalf("alice from another /64: %v", err)
	}
}
