package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
)

func init() { Cases["LoginLimitsShared"] = loginLimitsShared }

// loginLimitsShared: failure windows counted through one handle are seen
// through another (a second replica, or a restart); a window restarts
// once it ended; concurrent failures are all counted; a success clears
// its key and marks the address known.
func loginLimitsShared(t *testing.T, e Engine) {
	ctx := context.Background()
	a, reopen, _ := open(t, e)
	b := reopen()
	long, short := 15*time.Minute, time.Minute
	fail := func(s Store, at time.Time) {
		must(0, s.AddLoginFailure(ctx, at, []auth.FailureKey{{Key: "ua|alice|6.6.6.6", Window: long}, {Key: "u|alice", Window: short}}))
	}
	read := func(s Store, at time.Time) (map[string]auth.FailureWindow, time.Time) {
		t.Helper()
		open, known, err := s.LoginFailures(ctx, at, []string{"ua|alice|6.6.6.6", "u|alice", "a|6.6.6.6"}, "alice|6.6.6.6")
		if err != nil {
			t.Fatal(err)
		}
		return open, known
	}
	fail(a, epoch)
	fail(b, epoch.Add(10*time.Second))
	fail(a, epoch.Add(20*time.Second))
	got, known := read(b, epoch.Add(30*time.Second))
	want := map[string]auth.FailureWindow{
		"ua|alice|6.6.6.6": {N: 3, Ends: epoch.Add(long)},
		"u|alice":          {N: 3, Ends: epoch.Add(short)},
	}
	if len(got) != len(want) || got["ua|alice|6.6.6.6"] != want["ua|alice|6.6.6.6"] || got["u|alice"] != want["u|alice"] || !known.IsZero() {
		t.Fatalf("windows through the other handle = %+v (known %v), want %+v and not known", got, known, want)
	}
	// The short window ends exactly at its end; the next failure opens a
	// new one, while the long one keeps counting.
	end := epoch.Add(short)
	if got, _ := read(a, end); len(got) != 1 || got["ua|alice|6.6.6.6"].N != 3 {
		t.Fatalf("at the short window's end = %+v, want only the long window", got)
	}
	fail(b, end)
	got, _ = read(a, end)
	if got["u|alice"] != (auth.FailureWindow{N: 1, Ends: end.Add(short)}) || got["ua|alice|6.6.6.6"].N != 4 {
		t.Fatalf("after a failure past the short window = %+v, want a new short window of 1 and the long one at 4", got)
	}
	// Concurrent failures from both handles all count.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			if err := s.AddLoginFailure(ctx, end, []auth.FailureKey{{Key: "a|6.6.6.6", Window: long}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got, _ := read(b, end); got["a|6.6.6.6"].N != 20 {
		t.Fatalf("after 20 concurrent failures: %+v, want 20", got["a|6.6.6.6"])
	}
	// A success clears its key only, and marks the address known.
	until := end.Add(24 * time.Hour)
	must(0, a.LoginSucceeded(ctx, end, "ua|alice|6.6.6.6", "alice|6.6.6.6", until))
	got, known = read(b, end)
	if _, ok := got["ua|alice|6.6.6.6"]; ok || got["u|alice"].N != 1 || got["a|6.6.6.6"].N != 20 || !known.Equal(until) {
		t.Fatalf("after a success = %+v, known until %v; want the (user, address) window gone, the others kept, known until %v", got, known, until)
	}
	// Long past every window, nothing is open.
	if got, _ := read(a, until); len(got) != 0 {
		t.Fatalf("long after = %+v, want nothing open", got)
	}
}
