package uibridge

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
)

// BenchmarkSessionCheck is one GET /v1/me through the whole handler (gate
// included, no network) with each credential. The difference between
// "session-cookie" and "launch-token" is what a login session costs a
// request: a prepared SQLite read of the session and its user.
func BenchmarkSessionCheck(b *testing.B) {
	st := openStore(b)
	var login *Login
	e := newEnvWith(b, st, &core.Registry{}, func(c *Config) {
		c.Logger = slogTo(io.Discard)
		login = &Login{Auth: auth.New(auth.Config{Store: st, Params: auth.Params{MemoryKiB: 64, Time: 1, Threads: 1}}), Local: true}
		c.Login = login
	})
	ctx := context.Background()
	if _, err := login.Auth.AddLocalUser(ctx, "alice", "alice-password", false); err != nil {
		b.Fatal(err)
	}
	session, _, err := login.Auth.Login(ctx, "alice", "alice-password", "127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	u, _ := login.Auth.FindUser(ctx, "alice")
	token, _, err := login.Auth.CreateToken(ctx, u.ID, "bench", 0)
	if err != nil {
		b.Fatal(err)
	}
	// The check alone: what a cookie costs a request on top of the gate.
	b.Run("session-auth-only", func(b *testing.B) {
		a := sessionAuth{login}
		req := httptest.NewRequest("GET", "/v1/me", nil)
		req.AddCookie(&http.Cookie{Name: login.CookieName(), Value: session})
		for b.Loop() {
			if _, ok := a.Authenticate(req); !ok {
				b.Fatal("session refused")
			}
		}
	})
	h := e.srv.Handler()
	for _, c := range []struct {
		name string
		set  func(*http.Request)
	}{
		{"launch-token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken) }},
		{"session-cookie", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: login.CookieName(), Value: session}) }},
		{"api-token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("GET", "/v1/me", nil)
				req.Host = "127.0.0.1:" + strconv.Itoa(e.port)
				req.RemoteAddr = "127.0.0.1:40000"
				c.set(req)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("GET /v1/me: %d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// ownerHeader is a test authenticator: the owner is whatever the header
// says, so a benchmark can connect a thousand users' clients without a
// thousand logins (BenchmarkSessionCheck measures those).
type ownerHeader struct{}

func (ownerHeader) Authenticate(r *http.Request) (Identity, bool) {
	o := r.Header.Get("X-Bench-Owner")
	return Identity{Owner: o}, o != ""
}

// BenchmarkFanoutPerUser: one user's workspace changes while users × 5
// clients are connected; only that user's 5 clients may receive it.
// "users-1" is the single-user baseline in the same run.
func BenchmarkFanoutPerUser(b *testing.B) {
	const perUser = 5
	for _, users := range []int{1, 1000} {
		b.Run(fmt.Sprintf("users-%d", users), func(b *testing.B) {
			e := newEnvWith(b, openStore(b), &core.Registry{}, func(c *Config) {
				c.Logger = slogTo(io.Discard)
				c.Authenticators = []Authenticator{ownerHeader{}}
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Every user has a workspace, so every client's snapshot is
			// non-empty and per-user.
			var target core.Workspace
			for u := range users {
				ws := testWorkspace(fmt.Sprintf("u%d", u))
				ws.Owner = fmt.Sprintf("user-%d", u)
				saved, err := e.svc.Feed().Save(ctx, ws)
				if err != nil {
					b.Fatal(err)
				}
				if u == 0 {
					target = saved
				}
			}
			rev := e.svc.Feed().Rev()
			owner := newFanout(perUser)
			others := newFanout(0)
			for u := range users {
				for range perUser {
					c, _, err := e.dial(ctx, "?since="+strconv.FormatInt(rev, 10), &dialOptions{
						HTTPHeader: http.Header{"X-Bench-Owner": {fmt.Sprintf("user-%d", u)}}})
					if err != nil {
						b.Fatalf("dial: %v", err)
					}
					if u == 0 {
						owner.read(c)
					} else {
						others.read(c)
					}
				}
			}
			eventually2(b, func() bool { return e.srv.hub.clientCount() == users*perUser })
			// Warm up (first writes, first encodings) outside the timing.
			for range 10 {
				target.LastActivityAt = time.Now()
				saved, err := e.svc.Feed().Save(ctx, target)
				if err != nil {
					b.Fatal(err)
				}
				target = saved
				for range perUser {
					<-owner.got
				}
			}
			rounds := 0
			for b.Loop() {
				target.LastActivityAt = time.Now()
				start := time.Now()
				saved, err := e.svc.Feed().Save(ctx, target)
				if err != nil {
					b.Fatal(err)
				}
				target = saved
				owner.round(b, saved.Rev, start)
				rounds++
			}
			b.StopTimer()
			// A change another user's client received would be waiting
			// here (they read continuously).
			select {
			case r := <-others.got:
				b.Fatalf("another user's client received rev %d", r.rev)
			case <-time.After(200 * time.Millisecond):
			}
			owner.report(b)
			b.ReportMetric(float64(rounds*perUser), "owner-receipts")
			cancel()
			owner.close()
			others.close()
		})
	}
}
