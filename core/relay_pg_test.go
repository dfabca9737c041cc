package core_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"

	"github.com/jackc/pgx/v5"
)

// flakyProvider lists nothing, or fails while failing is set.
type flakyProvider struct{ failing atomic.Bool }

func (p *flakyProvider) Describe(context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{Name: "flaky", Version: "1", Kind: "wasm", Capabilities: core.Capabilities{List: true}}, nil
}

func (p *flakyProvider) List(context.Context, core.Account) ([]core.Box, error) {
	if p.failing.Load() {
		return nil, core.Errorf(core.KindUnavailable, "the provider's API answered 503")
	}
	return nil, nil
}

func (p *flakyProvider) Get(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindNotFound, "no boxes here")
}

func (p *flakyProvider) Create(context.Context, core.Account, core.CreateSpec) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "flaky does not create")
}

func (p *flakyProvider) Suspend(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "flaky does not suspend")
}

func (p *flakyProvider) Resume(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "flaky does not resume")
}

func (p *flakyProvider) Delete(context.Context, core.Account, string) error {
	return core.Errorf(core.KindInvalid, "flaky does not delete")
}

// accountEvents collects a service's account events.
type accountEvents struct {
	mu   sync.Mutex
	list []core.AccountEvent
}

func collectAccountEvents(t *testing.T, svc *core.Service) *accountEvents {
	ev := &accountEvents{}
	ch, stop := svc.SubscribeAccounts(64)
	done := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case e := <-ch:
				ev.mu.Lock()
				ev.list = append(ev.list, e)
				ev.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { stop(); close(quit); <-done })
	return ev
}

func (e *accountEvents) states() []core.AccountState {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []core.AccountState
	for _, ev := range e.list {
		out = append(out, ev.Status.State)
	}
	return out
}

// TestReplicaStreamsCarryTransientMessages: replica B's subscribers get
// what replica A's make but does not store. A progress line comes with
// the revision it was saved at, once per revision, and never after a
// later revision of its workspace, even when its announcement arrives
// late; an account status A's reconciler announces reaches B's account
// subscribers once, with its message, and A hears no echo of its own.
func TestReplicaStreamsCarryTransientMessages(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	flaky := &flakyProvider{}
	acct := core.Account{ID: "acct-f", Owner: "alice", Provider: "flaky", Label: "flaky"}
	var svcs [2]*core.Service
	for i := range svcs {
		st := openPG(t, url)
		if i == 0 {
			if err := st.PutAccount(ctx, acct); err != nil {
				t.Fatal(err)
			}
		}
		reg := &core.Registry{}
		reg.Register("flaky", flaky)
		svc := newTestService(t, ctx, core.Config{Store: st, Providers: reg, Logger: slog.New(slog.NewTextHandler(&testsupport.SyncBuffer{}, nil))})
		svcs[i] = svc
	}
	a, b := svcs[0], svcs[1]

	// Progress.
	_, _, sub := b.Feed().SubscribeSnapshot(64)
	defer sub.Close()
	ws := core.Workspace{ID: "ws_p", Owner: "alice", Name: "p", AccountID: acct.ID, Provider: "flaky", State: core.StateCreating, CreatedAt: time.Now().UTC()}
	first, err := a.Feed().Save(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	// Each save is read by B before the next, as an action's progress
	// lines are (at most one a second): a store keeps a workspace's
	// latest revision only, so a replica that reads after two saves sees
	// the second alone.
	last := first.Rev - 1
	seen := func(rev int64) core.Workspace {
		t.Helper()
		for {
			ch := next(t, sub)
			if ch.Rev <= last {
				t.Fatalf("B's subscriber got revision %d after %d", ch.Rev, last)
			}
			last = ch.Rev
			if ch.Rev >= rev {
				if ch.Rev != rev {
					t.Fatalf("B's subscriber got revision %d, want %d", ch.Rev, rev)
				}
				return ch.Workspace
			}
		}
	}
	seen(first.Rev)
	var lines []core.Workspace
	for _, line := range []string{"pulling image: 1 of 3 layers done", "pulling image: 3 of 3 layers done"} {
		ws.Progress = line
		saved, err := a.Feed().Save(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		if got := seen(saved.Rev); got.Progress != line {
			t.Errorf("B's revision %d carries progress %q, want %q", saved.Rev, got.Progress, line)
		}
		if got, _ := b.Workspace("alice", ws.ID); got.Progress != line {
			t.Errorf("B's copy at revision %d carries progress %q, want %q", saved.Rev, got.Progress, line)
		}
		lines = append(lines, saved)
	}
	ws.Progress, ws.State, ws.BoxID = "", core.StateRunning, "box-1"
	final, err := a.Feed().Save(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if got := seen(final.Rev); got.Progress != "" || got.State != core.StateRunning {
		t.Errorf("B's final revision: %s with progress %q, want running without", got.State, got.Progress)
	}

	// A progress line announced late (after its workspace's next revision
	// was applied) is not shown: B's next change carries none, and B's
	// copy has none.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	late := `{"w":"ws_p","p":"pulling image: late"}`
	if _, err := conn.Exec(ctx, `SELECT pg_notify('companion_feed', $1)`, strconv.FormatInt(lines[1].Rev, 10)+"\n"+late); err != nil {
		t.Fatal(err)
	}
	ws.Name = "renamed"
	renamed, err := a.Feed().Save(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	ch := next(t, sub)
	if ch.Rev != renamed.Rev || ch.Workspace.Progress != "" {
		t.Fatalf("after a late progress line, B's subscriber got revision %d with progress %q; want %d without", ch.Rev, ch.Workspace.Progress, renamed.Rev)
	}
	if got, _ := b.Workspace("alice", ws.ID); got.Progress != "" {
		t.Errorf("B's copy carries progress %q", got.Progress)
	}

	// Account statuses: only A runs the reconciler.
	evA, evB := collectAccountEvents(t, a), collectAccountEvents(t, b)
	defer runReconciler(t, a, core.ReconcileConfig{Interval: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})()
	testsupport.Until(t, 30*time.Second, "A lists the account fine", func() bool { return a.AccountStatusOf(acct.ID).State == core.AccountOK })
	flaky.failing.Store(true)
	testsupport.Until(t, 30*time.Second, "B hears that the account fails", func() bool { return len(evB.states()) >= 1 })
	if got := b.AccountStatusOf(acct.ID); got.State != core.AccountFailing || got.Message == "" {
		t.Errorf("B's status of the account: %+v, want failing with A's message", got)
	}
	flaky.failing.Store(false)
	testsupport.Until(t, 30*time.Second, "B hears that the account works again", func() bool { return len(evB.states()) >= 2 })
	testsupport.Until(t, 30*time.Second, "A told its own subscribers", func() bool { return len(evA.states()) >= 2 })
	want := []core.AccountState{core.AccountFailing, core.AccountOK}
	for name, ev := range map[string]*accountEvents{"A": evA, "B": evB} {
		ev.mu.Lock()
		list := ev.list
		ev.mu.Unlock()
		if len(list) != 2 || list[0].Status.State != want[0] || list[1].Status.State != want[1] {
			t.Errorf("%s's account events: %v, want %v", name, ev.states(), want)
		}
		for _, e := range list {
			if e.Account.ID != acct.ID || e.Account.Owner != "alice" {
				t.Errorf("%s's event names account %q of %q", name, e.Account.ID, e.Account.Owner)
			}
		}
	}
}

// next is the subscription's next change.
func next(t *testing.T, sub *core.Subscription) core.Change {
	t.Helper()
	var ch *core.Change
	testsupport.Until(t, 20*time.Second, "the next change", func() bool {
		select {
		case c, ok := <-sub.C:
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			ch = c
			return true
		default:
			return false
		}
	})
	return *ch
}
