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
// clients are connected; only that user's 5 clients may receive it. Two
// servers run side by side, one with a single user (the baseline) and one
// with 1,000, and each iteration times one change on each, so a load spike
// on the shared machine hits both alike.
func BenchmarkFanoutPerUser(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	single := newUserFanout(b, ctx, 1)
	many := newUserFanout(b, ctx, 1000)
	for b.Loop() {
		single.change(b, ctx)
		many.change(b, ctx)
	}
	b.StopTimer()
	single.check(b)
	many.check(b)
	b.ReportMetric(ms(percentile(single.owner.lat, 99)), "single-user-p99-ms")
	b.ReportMetric(ms(percentile(many.owner.lat, 99)), "1000-users-p99-ms")
	b.ReportMetric(ms(percentile(single.owner.lat, 50)), "single-user-p50-ms")
	b.ReportMetric(ms(percentile(many.owner.lat, 50)), "1000-users-p50-ms")
	b.ReportMetric(float64(many.receipts), "owner-receipts")
	cancel()
	for _, f := range []*userFanout{single, many} {
		f.owner.close()
		f.others.close()
	}
}

const clientsPerUser = 5

// userFanout is one server with users × clientsPerUser clients; user-0
// owns the workspace that changes.
type userFanout struct {
	e             *testEnv
	target        core.Workspace
	owner, others *fanout
	receipts      int
}

func newUserFanout(b *testing.B, ctx context.Context, users int) *userFanout {
	e := newEnvWith(b, openStore(b), &core.Registry{}, func(c *Config) {
		c.Logger = slogTo(io.Discard)
		c.Authenticators = []Authenticator{ownerHeader{}}
	})
	f := &userFanout{e: e, owner: newFanout(clientsPerUser), others: newFanout(0)}
	// Every user has a workspace, so every client's view is per-user.
	for u := range users {
		ws := testWorkspace(fmt.Sprintf("u%d", u))
		ws.Owner = fmt.Sprintf("user-%d", u)
		saved, err := e.svc.Feed().Save(ctx, ws)
		if err != nil {
			b.Fatal(err)
		}
		if u == 0 {
			f.target = saved
		}
	}
	rev := e.svc.Feed().Rev()
	for u := range users {
		for range clientsPerUser {
			c, _, err := e.dial(ctx, "?since="+strconv.FormatInt(rev, 10), &dialOptions{
				HTTPHeader: http.Header{"X-Bench-Owner": {fmt.Sprintf("user-%d", u)}}})
			if err != nil {
				b.Fatalf("dial: %v", err)
			}
			if u == 0 {
				f.owner.read(c)
			} else {
				f.others.read(c)
			}
		}
	}
	eventually2(b, func() bool { return e.srv.hub.clientCount() == users*clientsPerUser })
	// Warm up (first writes, first encodings) outside the timing.
	for range 10 {
		f.save(b, ctx)
		for range clientsPerUser {
			<-f.owner.got
		}
	}
	return f
}

func (f *userFanout) save(b *testing.B, ctx context.Context) core.Workspace {
	f.target.LastActivityAt = time.Now()
	saved, err := f.e.svc.Feed().Save(ctx, f.target)
	if err != nil {
		b.Fatal(err)
	}
	f.target = saved
	return saved
}

// change saves the target and waits for its owner's clients.
func (f *userFanout) change(b *testing.B, ctx context.Context) {
	start := time.Now()
	saved := f.save(b, ctx)
	f.owner.round(b, saved.Rev, start)
	f.receipts += clientsPerUser
}

// check fails if any other user's client received a change (they read
// continuously, so one would be waiting).
func (f *userFanout) check(b *testing.B) {
	select {
	case r := <-f.others.got:
		b.Fatalf("another user's client received rev %d", r.rev)
	case <-time.After(200 * time.Millisecond):
	}
}
