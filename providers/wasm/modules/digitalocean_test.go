package modules_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/emulators/digitalocean"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

const doToken = "dop_v1_3e7f_module_test_token"

type doEnv struct {
	*env
	do    *digitalocean.Server
	clock *emulator.Clock
	acct  core.Account
}

func newDO(t *testing.T, o digitalocean.Options, config map[string]string) *doEnv {
	e := newEnv(t, "digitalocean")
	clock := clockStart()
	o.Token, o.Clock = doToken, clock
	if o.Delays == nil {
		o.Delays = &digitalocean.Delays{}
	}
	do := digitalocean.New(o)
	srv := serve(t, do)
	return &doEnv{env: e, do: do, clock: clock, acct: e.account(doToken, srv.URL, config)}
}

func TestDigitalOceanDescribe(t *testing.T) {
	d := newDO(t, digitalocean.Options{}, nil)
	describe(t, d.env, core.Capabilities{
		List: true, LastActivity: true, Suspend: true, SuspendKeepsFiles: true, ResumeSameIdentity: true,
		Delete: true, NativeIdlePause: true,
	}, "Authorization: Bearer {token}", "api_url", "config_id", "agent_kind", "ingress_hosts")
}

func TestDigitalOceanListFollowsPageTokens(t *testing.T) {
	d := newDO(t, digitalocean.Options{}, nil)
	statuses := []string{digitalocean.StatusReady, digitalocean.StatusPaused, digitalocean.StatusDetached, digitalocean.StatusFailed, digitalocean.StatusLocked}
	want := map[string]core.State{}
	for i := range 250 {
		st := statuses[i%len(statuses)]
		s := d.do.Seed(digitalocean.Session{Name: fmt.Sprintf("canvas-%d", i), Status: st, KeepWarm: true})
		want[s.SessionID] = map[string]core.State{
			digitalocean.StatusReady: core.StateRunning, digitalocean.StatusDetached: core.StateRunning,
			digitalocean.StatusPaused: core.StatePaused, digitalocean.StatusFailed: core.StateError,
			digitalocean.StatusLocked: core.StateUnknown,
		}[st]
		d.clock.Advance(time.Second)
	}
	// A session companion made carries the workspace in its name.
	ws := core.NewID("ws")
	mine := d.do.Seed(digitalocean.Session{Name: "companion-" + ws, KeepWarm: true})
	want[mine.SessionID] = core.StateRunning
	boxes := byID(t, d.list(d.acct))
	if len(boxes) != len(want) {
		t.Fatalf("listed %d sessions, want %d", len(boxes), len(want))
	}
	for id, st := range want {
		if b := boxes[id]; b.State != st || b.LastActivityAt.IsZero() || b.CreatedAt.IsZero() {
			t.Fatalf("session %s: %+v, want %s", id, b, st)
		}
	}
	if l := boxes[mine.SessionID].Labels; l[core.LabelWorkspace] != ws {
		t.Fatalf("labels %v", l)
	}
	if l := boxes[mine.SessionID].Labels; len(boxes[mine.SessionID].Labels) != 1 {
		t.Fatalf("labels %v", l)
	}
	reqs := d.do.Requests().Matching("GET", "/v2/agents/sessions")
	if len(reqs) != 3 {
		t.Fatalf("%d list requests, want 3", len(reqs))
	}
	onlyAPI(t, d.do.Requests().All(), "/v2/agents/")
}

func TestDigitalOceanLifecycleFromConfig(t *testing.T) {
	ctx := context.Background()
	d := newDO(t, digitalocean.Options{}, nil)
	cfg := d.do.SeedConfig("openhands", "agent: openhands\ntemplate: openhands\nkeep_warm: false\n")
	d.acct.Config["config_id"] = cfg.ConfigID
	ws := core.NewID("ws")
	spec := core.CreateSpec{WorkspaceID: ws, Name: "canvas work", Lifecycle: core.Lifecycle{IdlePauseAfter: 10 * time.Minute}}
	b := d.create(d.acct, spec)
	s, _ := d.do.Session(b.ID)
	if s.ConfigID != cfg.ConfigID || s.IdleTimeoutSeconds != 600 || s.Name != "companion-"+ws || s.AgentKind != "openhands" {
		t.Fatalf("created session %+v", s)
	}
	if b.State != core.StateRunning { // instant provisioning in this test
		t.Fatalf("created %+v", b)
	}
	if again := d.create(d.acct, spec); again.ID != b.ID || len(d.do.Sessions()) != 1 {
		t.Fatalf("second create made %s", again.ID)
	}

	d.clock.Advance(time.Minute)
	if p := d.suspend(d.acct, b.ID); p.State != core.StatePaused {
		t.Fatalf("suspended %+v", p)
	}
	if p := d.suspend(d.acct, b.ID); p.State != core.StatePaused { // 409: already paused
		t.Fatalf("second suspend %+v", p)
	}
	if r := d.resume(d.acct, b.ID); r.State != core.StateRunning || r.ID != b.ID {
		t.Fatalf("resumed %+v", r)
	}
	if r := d.resume(d.acct, b.ID); r.State != core.StateRunning { // 409: not paused
		t.Fatalf("second resume %+v", r)
	}
	d.delete(d.acct, b.ID)
	// The API keeps destroyed sessions: get reports them deleted.
	if got := d.get(d.acct, b.ID); got.State != core.StateDeleted {
		t.Fatalf("after delete: %s", got.State)
	}
	d.delete(d.acct, b.ID)
	// A new create for the same workspace does not find the destroyed one.
	if n := d.create(d.acct, spec); n.ID == b.ID {
		t.Fatal("create returned the destroyed session")
	}
	_, err := d.prov.Get(ctx, d.acct, "sess_doesnotexist")
	d.mustKind(err, core.KindNotFound)
	d.delete(d.acct, "sess_doesnotexist")
	onlyAPI(t, d.do.Requests().All(), "/v2/agents/")
}

func TestDigitalOceanDirectCreateAndResumeInProgress(t *testing.T) {
	d := newDO(t, digitalocean.Options{Delays: &digitalocean.Delays{Provision: 5 * time.Second, Resume: 5 * time.Second}, KeepWarmByDefault: true}, nil)
	ws := core.NewID("ws")
	b := d.create(d.acct, core.CreateSpec{WorkspaceID: ws, Options: map[string]string{"agent_kind": "claude-code", "repo_hint": "github.com/acme/app"}})
	if b.State != core.StateCreating {
		t.Fatalf("created %s, want creating", b.State)
	}
	s, _ := d.do.Session(b.ID)
	// keep_warm off: the harness refuses to pause keep_warm sessions.
	if s.AgentKind != "claude-code" || s.RepoHint != "github.com/acme/app" || s.KeepWarm || s.IdleTimeoutSeconds != 0 {
		t.Fatalf("created session %+v", s)
	}
	d.clock.Advance(5 * time.Second)
	d.suspend(d.acct, b.ID)
	d.clock.Advance(time.Hour)
	if r := d.resume(d.acct, b.ID); r.State != core.StateResuming {
		t.Fatalf("resume answered %s, want resuming", r.State)
	}
	// Seen later by list, while still provisioning, it is resuming too.
	if l := byID(t, d.list(d.acct))[b.ID]; l.State != core.StateResuming {
		t.Fatalf("list says %s", l.State)
	}
	d.clock.Advance(5 * time.Second)
	if g := d.get(d.acct, b.ID); g.State != core.StateRunning {
		t.Fatalf("after provisioning: %s", g.State)
	}

	// A keep_warm session cannot be paused: conflict, with DO's reason.
	warm := d.do.Seed(digitalocean.Session{Name: "warm", KeepWarm: true})
	_, err := d.prov.Suspend(context.Background(), d.acct, warm.SessionID)
	if ce := d.mustKind(err, core.KindConflict); !strings.Contains(ce.Message, "keep_warm") {
		t.Fatalf("message %q", ce.Message)
	}
	_, err = d.prov.Create(context.Background(), d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Options: map[string]string{"config_id": "x", "repo_hint": "y"}})
	d.mustKind(err, core.KindInvalid)
}

func TestDigitalOceanNativeIdlePause(t *testing.T) {
	d := newDO(t, digitalocean.Options{}, nil)
	b := d.create(d.acct, core.CreateSpec{WorkspaceID: core.NewID("ws"), Lifecycle: core.Lifecycle{IdlePauseAfter: 5 * time.Minute}})
	d.clock.Advance(3 * time.Minute)
	if err := d.do.Touch(b.ID); err != nil { // agent output: an event
		t.Fatal(err)
	}
	event := d.clock.Now()
	if g := d.get(d.acct, b.ID); g.State != core.StateRunning || !g.LastActivityAt.Equal(event) {
		t.Fatalf("after an event: %+v (want last activity %v)", g, event)
	}
	d.clock.Advance(6 * time.Minute)
	mark := len(d.do.Requests().All())
	if g := d.get(d.acct, b.ID); g.State != core.StatePaused {
		t.Fatalf("after idling: %s", g.State)
	}
	if l := byID(t, d.list(d.acct))[b.ID]; l.State != core.StatePaused {
		t.Fatalf("list says %s", l.State)
	}
	noWake(t, since(d.do.Requests().All(), mark), b.ID)
	if s, _ := d.do.Session(b.ID); s.Status != digitalocean.StatusPaused || s.PauseReason != digitalocean.PauseIdle {
		t.Fatalf("reading changed the session: %+v", s)
	}
}

func TestDigitalOceanErrors(t *testing.T) {
	ctx := context.Background()
	// Both error body shapes (and the split the emulator defaults to)
	// give the provider's message.
	for _, style := range []digitalocean.ErrorStyle{digitalocean.ErrorsSplit, digitalocean.ErrorsClassic, digitalocean.ErrorsEnvelope} {
		t.Run(fmt.Sprint(style), func(t *testing.T) {
			d := newDO(t, digitalocean.Options{ErrorStyle: style}, nil)
			_, err := d.prov.Suspend(ctx, d.acct, "sess_nope")
			if ce := d.mustKind(err, core.KindNotFound); !strings.Contains(ce.Message, "sess_nope") {
				t.Fatalf("message %q", ce.Message)
			}
			d.do.Faults().RateLimit(1, 11*time.Second)
			_, err = d.prov.List(ctx, d.acct)
			if ce := d.mustKind(err, core.KindRateLimited); ce.RetryAfter != 11*time.Second || !strings.Contains(ce.Message, "Rate limit exceeded") {
				t.Fatalf("%v, retry after %v", ce, ce.RetryAfter)
			}
			d.do.Faults().Fail(1, 502)
			_, err = d.prov.List(ctx, d.acct)
			d.mustKind(err, core.KindUnavailable)
			wrong := d.account("dop_v1_wrong_51de", d.acct.Config["api_url"], nil)
			_, err = d.prov.List(ctx, wrong)
			if ce := d.mustKind(err, core.KindUnauthorized); !strings.Contains(ce.Message, "Unable to authenticate you") {
				t.Fatalf("message %q", ce.Message)
			}
		})
	}
}
