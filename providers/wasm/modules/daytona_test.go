package modules_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

const daytonaToken = "dtn_0f8c2a7e_module_test_token"

type daytonaEnv struct {
	*env
	dt    *daytona.Server
	clock *emulator.Clock
	acct  core.Account
}

// newDaytona starts the Daytona emulator (instant transitions unless
// delays are given) and an account pointing at it.
func newDaytona(t *testing.T, delays *daytona.Delays) *daytonaEnv {
	e := newEnv(t, "daytona")
	if delays == nil {
		delays = &daytona.Delays{}
	}
	clock := clockStart()
	dt := daytona.New(daytona.Options{Token: daytonaToken, Clock: clock, Delays: delays})
	srv := serve(t, dt)
	return &daytonaEnv{env: e, dt: dt, clock: clock, acct: e.account(daytonaToken, srv.URL+"/api", nil)}
}

func TestDaytonaDescribe(t *testing.T) {
	d := newDaytona(t, nil)
	describe(t, d.env, core.Capabilities{
		List: true, LastActivity: true, Suspend: true, SuspendKeepsFiles: true, ResumeSameIdentity: true,
		Delete: true, NativeIdlePause: true, NativePausedTTL: true,
	}, "Authorization: Bearer {token}", "api_url", "organization_id", "target", "snapshot", "proxy_hosts")
}

func TestDaytonaListFollowsCursorPages(t *testing.T) {
	d := newDaytona(t, nil)
	// 450 boxes at 200 a page: three pages.
	states := []string{daytona.StateStarted, daytona.StateStopped, daytona.StateArchived, daytona.StateError}
	want := map[string]core.State{}
	for i := range 450 {
		st := states[i%len(states)]
		sb := d.dt.Seed(daytona.SeedSandbox{State: st, Labels: map[string]string{"team": fmt.Sprint(i)}})
		want[sb.ID] = map[string]core.State{
			daytona.StateStarted: core.StateRunning, daytona.StateStopped: core.StatePaused,
			daytona.StateArchived: core.StatePaused, daytona.StateError: core.StateError,
		}[st]
		d.clock.Advance(time.Second)
	}
	boxes := byID(t, d.list(d.acct))
	if len(boxes) != len(want) {
		t.Fatalf("listed %d boxes, want %d", len(boxes), len(want))
	}
	for id, st := range want {
		b := boxes[id]
		if b.State != st {
			t.Fatalf("box %s is %s, want %s", id, b.State, st)
		}
		if b.LastActivityAt.IsZero() || b.CreatedAt.IsZero() {
			t.Fatalf("box %s lacks times: %+v", id, b)
		}
		if b.Size == nil || b.Size.Bytes != 3<<30 || b.Size.Source != core.SizeProviderAPIAllocated {
			t.Fatalf("box %s size %+v, want 3 GiB allocated", id, b.Size)
		}
		if b.Labels["team"] == "" {
			t.Fatalf("box %s lost its labels: %v", id, b.Labels)
		}
	}
	var pages, cursors int
	for _, r := range d.dt.Requests().Matching("GET", "/api/sandbox") {
		pages++
		if strings.Contains(r.Query, "cursor=") {
			cursors++
		}
	}
	if pages != 3 || cursors != 2 {
		t.Fatalf("%d list requests (%d with a cursor), want 3 (2)", pages, cursors)
	}
	onlyAPI(t, d.dt.Requests().All(), "/api/sandbox")
}

func TestDaytonaLifecycle(t *testing.T) {
	ctx := context.Background()
	d := newDaytona(t, nil)
	ws := core.NewID("ws")
	spec := core.CreateSpec{
		WorkspaceID: ws, Name: "my project",
		Lifecycle: core.Lifecycle{IdlePauseAfter: 10*time.Minute + time.Second, PausedTTL: 10 * 24 * time.Hour},
		Options:   map[string]string{"snapshot": "daytonaio/sandbox:0.5", "target": "eu"},
	}
	b := d.create(d.acct, spec)
	if b.State != core.StateRunning || b.Name != "my project" {
		t.Fatalf("created %+v", b)
	}
	sb, ok := d.dt.Sandbox(b.ID)
	if !ok {
		t.Fatal("the emulator has no such sandbox")
	}
	// The native lifecycle, in minutes: idle rounded up, the TTL as
	// auto-delete, archiving pushed past it (30 days).
	if sb.AutoStopInterval != 11 || sb.AutoDeleteInterval != 14400 || sb.AutoArchiveInterval != 0 {
		t.Fatalf("intervals stop=%d archive=%d delete=%d", sb.AutoStopInterval, sb.AutoArchiveInterval, sb.AutoDeleteInterval)
	}
	if sb.Labels[core.LabelWorkspace] != ws || sb.Labels["companion.name"] != "my project" || sb.Name != "companion-"+ws ||
		sb.Snapshot != "daytonaio/sandbox:0.5" || sb.Target != "eu" {
		t.Fatalf("created sandbox %+v", sb)
	}

	// A retried create returns the same box.
	again := d.create(d.acct, spec)
	if again.ID != b.ID || len(d.dt.Sandboxes()) != 1 {
		t.Fatalf("second create made %s (%d sandboxes)", again.ID, len(d.dt.Sandboxes()))
	}
	if got := d.get(d.acct, b.ID); got.State != core.StateRunning || got.Labels[core.LabelWorkspace] != ws {
		t.Fatalf("get %+v", got)
	}

	d.clock.Advance(time.Minute)
	p := d.suspend(d.acct, b.ID)
	if p.State != core.StatePaused || p.PausedAt.IsZero() {
		t.Fatalf("suspended %+v", p)
	}
	stops := len(d.dt.Requests().Matching("POST", "/stop"))
	if again := d.suspend(d.acct, b.ID); again.State != core.StatePaused {
		t.Fatalf("second suspend: %+v", again)
	}
	if n := len(d.dt.Requests().Matching("POST", "/stop")); n != stops || n != 1 {
		t.Fatalf("%d stop requests, want 1", n)
	}
	r := d.resume(d.acct, b.ID)
	if r.State != core.StateRunning || r.ID != b.ID || !r.PausedAt.IsZero() {
		t.Fatalf("resumed %+v", r)
	}
	d.resume(d.acct, b.ID)
	if n := len(d.dt.Requests().Matching("POST", "/start")); n != 1 {
		t.Fatalf("%d start requests, want 1", n)
	}

	d.delete(d.acct, b.ID)
	if _, err := d.prov.Get(ctx, d.acct, b.ID); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	d.delete(d.acct, b.ID) // already gone: fine
	onlyAPI(t, d.dt.Requests().All(), "/api/sandbox")
}

func TestDaytonaTransitionsInProgress(t *testing.T) {
	d := newDaytona(t, &daytona.Delays{Create: 5 * time.Second, Stop: 5 * time.Second, Start: 5 * time.Second, Destroy: 5 * time.Second})
	b := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Name: "slow"})
	if b.State != core.StateCreating {
		t.Fatalf("created %s, want creating", b.State)
	}
	_, err := d.prov.Suspend(context.Background(), d.acct, b.ID)
	d.mustKind(err, core.KindConflict)
	d.clock.Advance(5 * time.Second)
	if p := d.suspend(d.acct, b.ID); p.State != core.StatePausing {
		t.Fatalf("suspend answered %s, want pausing", p.State)
	}
	// Stopping: pausing again is fine, resuming must wait.
	d.suspend(d.acct, b.ID)
	_, err = d.prov.Resume(context.Background(), d.acct, b.ID)
	d.mustKind(err, core.KindConflict)
	d.clock.Advance(5 * time.Second)
	if r := d.resume(d.acct, b.ID); r.State != core.StateResuming {
		t.Fatalf("resume answered %s, want resuming", r.State)
	}
	d.clock.Advance(5 * time.Second)
	// Deleting twice while destroying: the second answers 409 "in
	// progress", which means done.
	d.delete(d.acct, b.ID)
	d.delete(d.acct, b.ID)
	if got := d.get(d.acct, b.ID); got.State != core.StateDeleting {
		t.Fatalf("after delete: %s, want deleting", got.State)
	}
}

func TestDaytonaDuplicateNameIsConflict(t *testing.T) {
	d := newDaytona(t, nil)
	ws := core.NewID("ws")
	// Something unlabelled already holds the name companion would use.
	d.dt.Seed(daytona.SeedSandbox{Name: "companion-" + ws})
	_, err := d.prov.Create(context.Background(), d.acct, core.CreateSpec{WorkspaceID: ws})
	d.mustKind(err, core.KindConflict)
}

func TestDaytonaNativeAutoStop(t *testing.T) {
	d := newDaytona(t, nil)
	ws := core.NewID("ws")
	b := d.create(d.acct, core.CreateSpec{WorkspaceID: ws, Lifecycle: core.Lifecycle{IdlePauseAfter: 5 * time.Minute}})
	d.clock.Advance(2 * time.Minute)
	d.dt.Touch(b.ID) // toolbox activity resets the idle clock
	active := d.clock.Now()
	if got := d.get(d.acct, b.ID); got.State != core.StateRunning || !got.LastActivityAt.Equal(active) {
		t.Fatalf("after activity: %s, last activity %v want %v", got.State, got.LastActivityAt, active)
	}
	d.clock.Advance(6 * time.Minute) // idle for 6 > 5 minutes: Daytona stops it
	mark := len(d.dt.Requests().All())
	got := d.get(d.acct, b.ID)
	if got.State != core.StatePaused || got.PausedAt.IsZero() {
		t.Fatalf("after idling: %+v", got)
	}
	listed := byID(t, d.list(d.acct))[b.ID]
	if listed.State != core.StatePaused {
		t.Fatalf("list says %s", listed.State)
	}
	noWake(t, since(d.dt.Requests().All(), mark), b.ID)
	if sb, _ := d.dt.Sandbox(b.ID); sb.State != daytona.StateStopped {
		t.Fatalf("reading woke the box: %s", sb.State)
	}
	if n := len(d.dt.Requests().Matching("POST", "/stop")); n != 0 {
		t.Fatalf("the module stopped the box itself (%d requests)", n)
	}
}

func TestDaytonaErrors(t *testing.T) {
	ctx := context.Background()
	d := newDaytona(t, nil)
	b := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})

	// 429 with the per-throttler header Daytona documents.
	d.dt.Faults().Add(emulator.Fault{Kind: emulator.FaultRateLimit, RetryAfter: 7 * time.Second})
	_, err := d.prov.List(ctx, d.acct)
	if ce := d.mustKind(err, core.KindRateLimited); ce.RetryAfter != 7*time.Second {
		t.Fatalf("retry after %v, want 7s", ce.RetryAfter)
	}
	// ... and with the plain Retry-After of the failed-auth throttler.
	d.dt.Faults().Add(emulator.Fault{Kind: emulator.FaultRateLimit, RetryAfter: 3 * time.Second, Throttler: "failed-auth"})
	_, err = d.prov.Get(ctx, d.acct, b.ID)
	if ce := d.mustKind(err, core.KindRateLimited); ce.RetryAfter != 3*time.Second {
		t.Fatalf("retry after %v, want 3s", ce.RetryAfter)
	}
	for _, status := range []int{500, 502, 503} {
		d.dt.Faults().Fail(1, status)
		_, err = d.prov.Get(ctx, d.acct, b.ID)
		d.mustKind(err, core.KindUnavailable)
	}
	// A request that hangs past the caller's deadline.
	d.dt.Faults().Hang(1)
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = d.prov.List(tctx, d.acct)
	cancel()
	d.mustKind(err, core.KindUnavailable)
	d.dt.Faults().Clear()

	for _, op := range []func(id string) error{
		func(id string) error { _, err := d.prov.Get(ctx, d.acct, id); return err },
		func(id string) error { _, err := d.prov.Suspend(ctx, d.acct, id); return err },
		func(id string) error { _, err := d.prov.Resume(ctx, d.acct, id); return err },
	} {
		d.mustKind(op("0c4e4e3a-0000-4000-8000-00000000dead"), core.KindNotFound)
	}
	d.delete(d.acct, "0c4e4e3a-0000-4000-8000-00000000dead")

	_, err = d.prov.Create(ctx, d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Options: map[string]string{"image": "x"}})
	d.mustKind(err, core.KindInvalid)

	// A refused token: unauthorized, and the message says so without it.
	wrong := d.account("dtn_wrong_token_7a1b9c", d.acct.Config["api_url"], nil)
	_, err = d.prov.List(ctx, wrong)
	ce := d.mustKind(err, core.KindUnauthorized)
	if !strings.Contains(ce.Message, "refused") || !strings.Contains(ce.Message, "Invalid API key") {
		t.Fatalf("message %q", ce.Message)
	}
	for _, r := range d.dt.Requests().All() {
		if r.Fault == "" && (len(r.Auth) != 1 || r.Auth[0] != "Authorization: Bearer") {
			t.Fatalf("request %s %s presented %v", r.Method, r.Path, r.Auth)
		}
	}
}

func TestDaytonaOrganizationHeader(t *testing.T) {
	e := newEnv(t, "daytona")
	dt := daytona.New(daytona.Options{Token: daytonaToken, Clock: clockStart(), Delays: &daytona.Delays{}})
	var mu sync.Mutex
	var orgs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		orgs = append(orgs, r.Header.Get("X-Daytona-Organization-ID"))
		mu.Unlock()
		dt.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	acct := e.account(daytonaToken, srv.URL+"/api", map[string]string{"organization_id": "org-42"})
	e.create(acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	e.list(acct)
	mu.Lock()
	defer mu.Unlock()
	if len(orgs) != 3 || strings.Join(orgs, ",") != "org-42,org-42,org-42" {
		t.Fatalf("organization headers %q", orgs)
	}
}
