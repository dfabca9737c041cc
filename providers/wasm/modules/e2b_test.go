package modules_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/emulators/e2b"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

const e2bToken = "e2b_41c9d0_module_test_key"

type e2bEnv struct {
	*env
	eb    *e2b.Server
	clock *emulator.Clock
	acct  core.Account
}

func newE2B(t *testing.T, config map[string]string) *e2bEnv {
	e := newEnv(t, "e2b")
	clock := clockStart()
	eb := e2b.New(e2b.Options{Token: e2bToken, Clock: clock, MaxConcurrent: -1})
	srv := serve(t, eb)
	return &e2bEnv{env: e, eb: eb, clock: clock, acct: e.account(e2bToken, srv.URL, config)}
}

func TestE2BDescribe(t *testing.T) {
	d := newE2B(t, nil)
	describe(t, d.env, core.Capabilities{
		List: true, Suspend: true, SuspendKeepsFiles: true, SuspendKeepsMemory: true, ResumeSameIdentity: true,
		Delete: true, NativeIdlePause: true,
	}, "X-API-Key: {token}", "api_url", "template", "sandbox_hosts")
}

func TestE2BListFollowsNextToken(t *testing.T) {
	d := newE2B(t, nil)
	want := map[string]core.State{}
	for i := range 250 {
		st := e2b.StateRunning
		if i%3 == 0 {
			st = e2b.StatePaused
		}
		sb := d.eb.Seed(e2b.Sandbox{State: st, DiskSizeMB: 1024, Metadata: map[string]string{"n": "x"}})
		want[sb.SandboxID] = map[string]core.State{e2b.StateRunning: core.StateRunning, e2b.StatePaused: core.StatePaused}[st]
		d.clock.Advance(time.Second)
	}
	boxes := byID(t, d.list(d.acct))
	if len(boxes) != len(want) {
		t.Fatalf("listed %d boxes, want %d", len(boxes), len(want))
	}
	for id, st := range want {
		b := boxes[id]
		if b.State != st || b.Labels["n"] != "x" {
			t.Fatalf("box %s: %+v, want %s", id, b, st)
		}
		if b.Size == nil || b.Size.Bytes != 1<<30 || b.Size.Source != core.SizeProviderAPIAllocated {
			t.Fatalf("box %s size %+v", id, b.Size)
		}
		if !b.LastActivityAt.IsZero() {
			t.Fatalf("E2B has no activity field, but box %s reports %v", id, b.LastActivityAt)
		}
		if st == core.StatePaused && b.PausedAt.IsZero() {
			t.Fatalf("paused box %s has no paused time", id)
		}
	}
	reqs := d.eb.Requests().Matching("GET", "/v2/sandboxes")
	if len(reqs) != 3 {
		t.Fatalf("%d list requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if !strings.Contains(r.Query, "state=running%2Cpaused") || strings.Contains(r.Query, "nextToken=") != (i > 0) {
			t.Fatalf("list request %d: %s", i, r.Query)
		}
	}
	onlyAPI(t, d.eb.Requests().All(), "/v2/sandboxes", "/sandboxes")
}

func TestE2BLifecycle(t *testing.T) {
	ctx := context.Background()
	d := newE2B(t, map[string]string{"template": "team-default"})
	ws := core.NewID("ws")
	spec := core.CreateSpec{WorkspaceID: ws, Name: "notebook", Lifecycle: core.Lifecycle{IdlePauseAfter: 10 * time.Minute},
		Options: map[string]string{"template": "python-data"}}
	b := d.create(d.acct, spec)
	if b.State != core.StateRunning || b.Name != "notebook" {
		t.Fatalf("created %+v", b)
	}
	sb, _ := d.eb.Sandbox(b.ID)
	// The timeout is the idle setting, and autoPause keeps it from killing.
	if !sb.AutoPause || !sb.EndAt.Equal(d.clock.Now().Add(10*time.Minute)) || sb.TemplateID != "python-data" ||
		sb.Metadata[core.LabelWorkspace] != ws || sb.Metadata["companion.name"] != "notebook" {
		t.Fatalf("created sandbox %+v", sb)
	}
	if again := d.create(d.acct, spec); again.ID != b.ID || len(d.eb.Sandboxes()) != 1 {
		t.Fatalf("second create made %s", again.ID)
	}

	d.clock.Advance(time.Minute)
	p := d.suspend(d.acct, b.ID)
	if p.State != core.StatePaused || !p.PausedAt.Equal(d.clock.Now()) {
		t.Fatalf("suspended %+v (now %v)", p, d.clock.Now())
	}
	if again := d.suspend(d.acct, b.ID); again.State != core.StatePaused { // 409 already paused: fine
		t.Fatalf("second suspend %+v", again)
	}
	d.clock.Advance(time.Hour)
	r := d.resume(d.acct, b.ID)
	if r.State != core.StateRunning || r.ID != b.ID {
		t.Fatalf("resumed %+v", r)
	}
	// Resume grants the workspace's own timeout again.
	if sb, _ := d.eb.Sandbox(b.ID); !sb.EndAt.Equal(d.clock.Now().Add(10 * time.Minute)) {
		t.Fatalf("after resume the box ends at %v, want now+10m", sb.EndAt)
	}
	d.resume(d.acct, b.ID)
	if n := len(d.eb.Requests().Matching("POST", "/connect")); n != 1 {
		t.Fatalf("%d connect requests, want 1", n)
	}

	d.delete(d.acct, b.ID)
	if _, err := d.prov.Get(ctx, d.acct, b.ID); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	d.delete(d.acct, b.ID)

	// Without an idle setting the module still sends a sane timeout and
	// autoPause (the API default of 15 s would end the box at once), and
	// the account's default template.
	b2 := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})
	sb2, _ := d.eb.Sandbox(b2.ID)
	if !sb2.AutoPause || !sb2.EndAt.Equal(d.clock.Now().Add(15*time.Minute)) || sb2.TemplateID != "team-default" {
		t.Fatalf("default create: %+v", sb2)
	}
	onlyAPI(t, d.eb.Requests().All(), "/v2/sandboxes", "/sandboxes")
}

func TestE2BNativeAutoPause(t *testing.T) {
	d := newE2B(t, nil)
	b := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Lifecycle: core.Lifecycle{IdlePauseAfter: 5 * time.Minute}})
	start := d.clock.Now()
	d.clock.Advance(7 * time.Minute) // the TTL fires at 5 minutes: paused, not killed
	mark := len(d.eb.Requests().All())
	got := d.get(d.acct, b.ID)
	if got.State != core.StatePaused || !got.PausedAt.Equal(start.Add(5*time.Minute)) {
		t.Fatalf("after the timeout: %+v", got)
	}
	if listed := byID(t, d.list(d.acct))[b.ID]; listed.State != core.StatePaused {
		t.Fatalf("list says %s", listed.State)
	}
	noWake(t, since(d.eb.Requests().All(), mark), b.ID)
	if sb, _ := d.eb.Sandbox(b.ID); sb.State != e2b.StatePaused {
		t.Fatalf("reading woke the box: %s", sb.State)
	}
}

func TestE2BErrors(t *testing.T) {
	ctx := context.Background()
	d := newE2B(t, nil)
	b := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws")})

	d.eb.Faults().RateLimit(1, 9*time.Second)
	_, err := d.prov.List(ctx, d.acct)
	if ce := d.mustKind(err, core.KindRateLimited); ce.RetryAfter != 9*time.Second {
		t.Fatalf("retry after %v", ce.RetryAfter)
	}
	d.eb.Faults().Add(emulator.Fault{Kind: emulator.FaultStatus, Status: 503, RetryAfter: 4 * time.Second})
	_, err = d.prov.Get(ctx, d.acct, b.ID)
	if ce := d.mustKind(err, core.KindUnavailable); ce.RetryAfter != 4*time.Second {
		t.Fatalf("retry after %v", ce.RetryAfter)
	}
	d.eb.Faults().Fail(1, 500)
	_, err = d.prov.Suspend(ctx, d.acct, b.ID)
	d.mustKind(err, core.KindUnavailable)

	_, err = d.prov.Get(ctx, d.acct, "idontexist0000000000")
	d.mustKind(err, core.KindNotFound)
	_, err = d.prov.Resume(ctx, d.acct, "idontexist0000000000")
	d.mustKind(err, core.KindNotFound)
	_, err = d.prov.Suspend(ctx, d.acct, "idontexist0000000000")
	d.mustKind(err, core.KindNotFound)
	d.delete(d.acct, "idontexist0000000000")

	// A timeout beyond the team's maximum is refused by E2B as a bad
	// request: invalid, with E2B's reason.
	_, err = d.prov.Create(ctx, d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Lifecycle: core.Lifecycle{IdlePauseAfter: 48 * time.Hour}})
	if ce := d.mustKind(err, core.KindInvalid); !strings.Contains(ce.Message, "Timeout cannot be greater") {
		t.Fatalf("message %q", ce.Message)
	}

	wrong := d.account("e2b_wrong_9f00aa", d.acct.Config["api_url"], nil)
	_, err = d.prov.List(ctx, wrong)
	if ce := d.mustKind(err, core.KindUnauthorized); !strings.Contains(ce.Message, "refused") {
		t.Fatalf("message %q", ce.Message)
	}
	for _, r := range d.eb.Requests().All() {
		if len(r.Auth) != 1 || r.Auth[0] != "X-API-Key" {
			t.Fatalf("request %s %s presented %v", r.Method, r.Path, r.Auth)
		}
	}
}
