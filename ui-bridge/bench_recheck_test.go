package uibridge

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
)

// BenchmarkCredentialRecheck: 1,000 users, each with one session and one
// open stream, and one recheck of all their credentials (what the server
// does every --stream-recheck), on SQLite: every check reads the store and
// touches the session once a minute, as in a running server. The baseline is the same 1,000
// session lookups made directly, each with a deadline as in the recheck:
// the difference is what the hub adds (collecting the credentials of open
// streams).
func BenchmarkCredentialRecheck(b *testing.B) {
	const users = 1000
	ctx := context.Background()
	st := openStore(b)
	clock := fakeclock.New(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	login := &Login{Auth: auth.New(auth.Config{Store: st, Now: clock.Now, Params: auth.Params{MemoryKiB: 64, Time: 1, Threads: 1}}), Local: true}
	e := newEnvWith(b, st, &core.Registry{}, func(c *Config) {
		c.Logger = slogTo(io.Discard)
		c.Login = login
		c.Token = ""
		c.Clock = clock
		c.CredentialRecheck = 1000 * time.Hour // only the benchmark rechecks
	})
	secrets := make([]string, users)
	for i := range users {
		u, err := login.Auth.AddLocalUser(ctx, fmt.Sprintf("user%d", i), "a-password-1", false)
		if err != nil {
			b.Fatal(err)
		}
		if secrets[i], err = login.Auth.StartSession(ctx, u.ID, "local"); err != nil {
			b.Fatal(err)
		}
		c, _, err := e.dial(ctx, "", &dialOptions{HTTPHeader: http.Header{
			"Cookie": {login.CookieName() + "=" + secrets[i]}, "Origin": {e.base}}})
		if err != nil {
			b.Fatalf("dial %d: %v", i, err)
		}
		go func() { // read the snapshot, then whatever comes, until closed
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		}()
		b.Cleanup(func() { c.Close() })
	}
	eventually2(b, func() bool { return e.srv.hub.clientCount() == users })

	var recheck, direct time.Duration
	viaHub := func() {
		start := time.Now()
		if n := e.srv.recheckOnce(ctx); n != 0 {
			b.Fatalf("a recheck closed %d live streams", n)
		}
		recheck += time.Since(start)
	}
	lookups := func() {
		start := time.Now()
		for _, s := range secrets {
			// With a deadline, as each check of a recheck has (and as a
			// request's context can be cancelled): the SQLite driver
			// watches such a context for the length of the query.
			cctx, cancel := context.WithTimeout(ctx, credentialCheckTimeout)
			_, err := login.Auth.Session(cctx, s)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		}
		direct += time.Since(start)
	}
	// The clock moves 20 s before each side's turn: every check misses the
	// session cache (a second), and a session is touched when a minute has
	// passed since the last touch, on every third turn, so alternately on
	// either side.
	const step = 20 * time.Second
	for b.Loop() {
		clock.Advance(step)
		viaHub()
		clock.Advance(step)
		lookups()
	}
	b.StopTimer()
	if n := e.srv.hub.clientCount(); n != users {
		b.Fatalf("%d streams open after the rechecks, want %d", n, users)
	}
	n := float64(b.N)
	b.ReportMetric(ms(recheck)/n, "recheck-1000-streams-ms")
	b.ReportMetric(ms(direct)/n, "1000-session-lookups-ms")
	b.ReportMetric(float64(recheck)/float64(direct), "ratio")
}
