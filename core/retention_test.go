package core_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
)

// retProvider emulates a provider whose boxes the test pauses, resumes
// and deletes by hand; Delete may be made to fail.
type retProvider struct {
	mu        sync.Mutex
	boxes     map[string]core.Box
	deletes   []string
	deleteErr error
}

func (p *retProvider) Describe(context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{Name: "ret", Kind: "builtin", Capabilities: core.Capabilities{List: true, Suspend: true, Delete: true, SuspendKeepsFiles: true}}, nil
}

func (p *retProvider) List(context.Context, core.Account) ([]core.Box, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []core.Box
	for _, b := range p.boxes {
		out = append(out, b)
	}
	return out, nil
}

func (p *retProvider) Get(_ context.Context, _ core.Account, id string) (core.Box, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.boxes[id]; ok {
		return b, nil
	}
	return core.Box{}, core.Errorf(core.KindNotFound, "box %s not found", id)
}

func (p *retProvider) Create(context.Context, core.Account, core.CreateSpec) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "not here")
}

func (p *retProvider) Suspend(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "not here")
}

func (p *retProvider) Resume(_ context.Context, _ core.Account, id string) (core.Box, error) {
	p.setState(id, core.StateRunning)
	return p.Get(context.Background(), core.Account{}, id)
}

func (p *retProvider) Delete(_ context.Context, _ core.Account, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deletes = append(p.deletes, id)
	if p.deleteErr != nil {
		return p.deleteErr
	}
	delete(p.boxes, id)
	return nil
}

func (p *retProvider) setState(id string, st core.State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.boxes[id]
	b.State = st
	if st != core.StatePaused {
		b.PausedAt = time.Time{}
	}
	p.boxes[id] = b
}

func (p *retProvider) deleted() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.deletes...)
}

// retEnv is a service on a real SQLite file with a fake clock and one
// account of retProvider.
type retEnv struct {
	t     *testing.T
	store *db.Store
	svc   *core.Service
	clock *fakeclock.Clock
	prov  *retProvider
	ctx   context.Context
}

const retAccount = "acc_ret"

func newRetEnv(t *testing.T, serve bool) *retEnv {
	t.Helper()
	return newRetEnvWith(t, serve, nil)
}

// newRetEnvWith is newRetEnv with the retention store wrapped by wrap.
func newRetEnvWith(t *testing.T, serve bool, wrap func(core.RetentionStore) core.RetentionStore) *retEnv {
	t.Helper()
	return newRetEnvFull(t, serve, wrap, nil)
}

// newRetEnvObserved is newRetEnv (serve) with an Observer.
func newRetEnvObserved(t *testing.T, obs core.Observer) *retEnv {
	t.Helper()
	return newRetEnvFull(t, true, nil, obs)
}

func newRetEnvFull(t *testing.T, serve bool, wrap func(core.RetentionStore) core.RetentionStore, obs core.Observer) *retEnv {
	t.Helper()
	ctx := context.Background()
	st, err := db.Open(ctx, filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	e := &retEnv{t: t, store: st, clock: fakeclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)),
		prov: &retProvider{boxes: map[string]core.Box{}}, ctx: ctx}
	reg := &core.Registry{}
	reg.Register("ret", e.prov)
	var rs core.RetentionStore = st
	if wrap != nil {
		rs = wrap(st)
	}
	t.Cleanup(func() { st.Close() })
	e.svc = newTestService(t, ctx, core.Config{Store: st, Retention: rs, Providers: reg, Clock: e.clock, MaxAttempts: 1,
		ScheduledDeletion: serve, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Observer: obs})
	if _, err := e.svc.EnsureAccount(ctx, core.Account{ID: retAccount, Provider: "ret", Label: "ret"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// paused adds a box paused since `ago` and its workspace.
func (e *retEnv) paused(name string, ago time.Duration, size int64) core.Workspace {
	e.t.Helper()
	at := e.clock.Now().Add(-ago).UTC()
	box := core.Box{ID: "box_" + name, State: core.StatePaused, PausedAt: at, Labels: map[string]string{core.LabelWorkspace: "ws_" + name}}
	e.prov.mu.Lock()
	e.prov.boxes[box.ID] = box
	e.prov.mu.Unlock()
	ws, err := e.svc.Feed().Save(e.ctx, core.Workspace{ID: "ws_" + name, Name: name, AccountID: retAccount, Provider: "ret",
		State: core.StatePaused, BoxID: box.ID, PausedAt: at, StopReason: core.StopCompanion,
		Size: &core.Size{Bytes: size, Source: core.SizeProviderAPIUsed, At: at}, CreatedAt: at.Add(-time.Hour)})
	if err != nil {
		e.t.Fatal(err)
	}
	return ws
}

func (e *retEnv) ws(id string) (core.Workspace, bool) { return e.svc.Feed().Get(id) }

func (e *retEnv) setPolicy(p core.RetentionPolicy) {
	e.t.Helper()
	p.AccountID = retAccount
	if _, err := e.svc.SetRetentionPolicy(core.WithActor(e.ctx, "test"), "", p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *retEnv) tick() core.RetentionTickReport {
	e.t.Helper()
	rep := e.svc.RetentionTick(e.ctx, core.RetentionConfig{})
	if rep.Err != nil {
		e.t.Fatalf("tick: %v", rep.Err)
	}
	return rep
}

func (e *retEnv) audit(action string) []core.AuditEntry {
	e.t.Helper()
	all, err := e.store.ListAudit(e.ctx, "", 0, 500)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []core.AuditEntry
	for _, a := range all {
		if a.Action == action {
			out = append(out, a)
		}
	}
	return out
}

// TestRetentionDeletesWhatThePreviewListed: the dry run lists the paused
// workspaces a policy would delete (not the kept one, not the running or
// crashed one); once enabled, the tick deletes exactly those of them that
// are still paused at the provider, skips one resumed after it was
// scheduled (the provider says running, companion's record still paused),
// and audits each decision as "retention".
func TestRetentionDeletesWhatThePreviewListed(t *testing.T) {
	e := newRetEnv(t, true)
	old := e.paused("old", 3*time.Hour, 2<<30)
	resumed := e.paused("resumed", 4*time.Hour, 1<<30)
	young := e.paused("young", 10*time.Minute, 1<<30)
	kept := e.paused("kept", 5*time.Hour, 1<<30)
	if _, err := e.svc.SetKeep(e.ctx, "", kept.ID, true); err != nil {
		t.Fatal(err)
	}
	crashed := e.paused("crashed", 6*time.Hour, 1<<30)
	crashed.State, crashed.StopReason, crashed.PausedAt = core.StateStopped, core.StopCrashed, time.Time{}
	if _, err := e.svc.Feed().Save(e.ctx, crashed); err != nil {
		t.Fatal(err)
	}

	price := 0.5
	pv, err := e.svc.PreviewRetention(e.ctx, "", core.RetentionPolicy{AccountID: retAccount, Enabled: true, PausedFor: time.Hour,
		WarnBefore: time.Minute, StoragePricePerGiBMonth: &price})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, it := range pv.Workspaces {
		listed = append(listed, it.Workspace.ID)
	}
	if got, want := strings.Join(listed, ","), strings.Join([]string{old.ID, resumed.ID, young.ID}, ","); got != want {
		t.Fatalf("preview lists %s; want %s (soonest first, then by id; not kept, not crashed)", got, want)
	}
	if pv.Workspaces[2].DeleteAt != young.PausedAt.Add(time.Hour) || !pv.Workspaces[0].DeleteAt.Equal(e.clock.Now()) {
		t.Errorf("delete times %v, %v; want the young one at pause+1h and past-due ones now", pv.Workspaces[2].DeleteAt, pv.Workspaces[0].DeleteAt)
	}
	if pv.ReclaimBytes != 4<<30 || pv.MonthlySavings == nil || *pv.MonthlySavings != 2 {
		t.Errorf("reclaim %d bytes, savings %v; want 4 GiB and 2.0 a month", pv.ReclaimBytes, pv.MonthlySavings)
	}
	if ws, _ := e.ws(old.ID); !ws.DeleteAfter.IsZero() {
		t.Fatal("a preview scheduled something")
	}

	e.setPolicy(core.RetentionPolicy{Enabled: true, PausedFor: time.Hour, WarnBefore: time.Minute})
	for _, w := range []core.Workspace{old, resumed, young} {
		if ws, _ := e.ws(w.ID); !ws.DeleteAfter.Equal(w.PausedAt.Add(time.Hour)) {
			t.Errorf("%s: delete_after %v; want paused_at + 1h", w.ID, ws.DeleteAfter)
		}
	}
	for _, id := range []string{kept.ID, crashed.ID} {
		if ws, _ := e.ws(id); !ws.DeleteAfter.IsZero() {
			t.Errorf("%s is scheduled; kept and crashed workspaces never are", id)
		}
	}

	// Resumed at the provider after it was scheduled: companion's record
	// still says paused (no reconcile pass ran), the re-check under the
	// lock asks the provider.
	e.prov.setState("box_resumed", core.StateRunning)
	rep := e.tick()
	if rep.Started != 1 || rep.Skipped != 1 {
		t.Fatalf("tick: %+v; want 1 delete started, 1 skipped", rep)
	}
	testsupport.Until(t, 10*time.Second, "the old workspace to be deleted", func() bool { _, ok := e.ws(old.ID); return !ok })
	if got := e.prov.deleted(); len(got) != 1 || got[0] != "box_old" {
		t.Fatalf("provider deletes %v; want only box_old", got)
	}
	if ws, _ := e.ws(resumed.ID); ws.State != core.StateRunning || !ws.DeleteAfter.IsZero() {
		t.Errorf("resumed workspace is %s with delete_after %v", ws.State, ws.DeleteAfter)
	}
	skips := e.audit(core.AuditRetentionSkip)
	if len(skips) != 1 || skips[0].WorkspaceID != resumed.ID || skips[0].Actor != core.ActorRetention || !strings.Contains(skips[0].Outcome, "resumed") {
		t.Errorf("skip entries %+v", skips)
	}
	// The outcome entry is written just after the removal is saved.
	testsupport.Until(t, 10*time.Second, "the delete's outcome in the audit trail", func() bool { return len(e.audit(core.AuditDelete)) == 2 })
	var deletes []string
	for _, a := range e.audit(core.AuditDelete) {
		if a.Actor != core.ActorRetention {
			t.Errorf("delete audited as %q", a.Actor)
		}
		deletes = append(deletes, a.WorkspaceID+":"+a.Outcome)
	}
	// This service has no exporter, so the delete's outcome says it went
	// ahead without one.
	if got := strings.Join(deletes, " "); !strings.HasPrefix(got, old.ID+":ok ") || !strings.HasSuffix(got, " "+old.ID+":started") {
		t.Errorf("delete entries %q", got)
	}
	if len(e.audit(core.AuditRetentionSchedule)) < 3 || len(e.audit(core.AuditRetentionPolicy)) != 1 {
		t.Errorf("schedule or policy changes not audited")
	}

	// The young one becomes due when the clock gets there, not before.
	if rep := e.tick(); rep.Started != 0 {
		t.Fatalf("young workspace deleted early: %+v", rep)
	}
	e.clock.Advance(time.Hour)
	if rep := e.tick(); rep.Started != 1 {
		t.Fatalf("young workspace not deleted when due: %+v", rep)
	}
	testsupport.Until(t, 10*time.Second, "the young workspace to be deleted", func() bool { _, ok := e.ws(young.ID); return !ok })
	if _, ok := e.ws(kept.ID); !ok {
		t.Fatal("kept workspace deleted")
	}
}

// TestRetentionBacksOffAFailedDelete: a delete that ends without removing
// the workspace is noticed by the next tick and backed off (stored with
// the claim); ticks before the backoff ends do not retry it.
func TestRetentionBacksOffAFailedDelete(t *testing.T) {
	e := newRetEnv(t, true)
	w := e.paused("stuck", 2*time.Hour, 1)
	e.prov.deleteErr = core.Errorf(core.KindInvalid, "the provider refuses")
	e.setPolicy(core.RetentionPolicy{Enabled: true, PausedFor: time.Hour})
	if rep := e.tick(); rep.Started != 1 {
		t.Fatalf("first tick %+v", rep)
	}
	testsupport.Until(t, 10*time.Second, "the failed delete to settle", func() bool {
		ws, _ := e.ws(w.ID)
		return ws.State == core.StatePaused && !ws.DeleteAfter.IsZero()
	})
	if rep := e.tick(); rep.BackedOff != 1 || rep.Started != 0 {
		t.Fatalf("tick after the failure: %+v; want one backoff", rep)
	}
	for range 3 {
		if rep := e.tick(); rep.Started+rep.BackedOff != 0 {
			t.Fatalf("retried during the backoff: %+v", rep)
		}
	}
	if n := len(e.prov.deleted()); n != 1 {
		t.Fatalf("%d provider deletes; want 1", n)
	}
	e.clock.Advance(2 * time.Minute)
	// The failed delete's goroutine may still hold the workspace's lock
	// (it saves the outcome before it lets go): a tick then skips it and
	// the next one retries.
	var last core.RetentionTickReport
	testsupport.Until(t, 10*time.Second, "a retry after the backoff", func() bool {
		last = e.tick()
		if last.BackedOff != 0 {
			t.Fatalf("backed off again after the backoff: %+v", last)
		}
		return last.Started == 1
	})
	b := e.audit(core.AuditRetentionBackoff)
	if len(b) != 1 || !strings.Contains(b[0].Outcome, "the provider refuses") {
		t.Errorf("backoff entries %+v", b)
	}
}

// TestRetentionWarnsOnceBeforeTheDelete: a workspace entering its warning
// window gets one notice for its owner, not one per tick, and a new
// pause (a new delete_after) gets a new one.
func TestRetentionWarnsOnceBeforeTheDelete(t *testing.T) {
	e := newRetEnv(t, true)
	notices, stop := e.svc.SubscribeNotices(16)
	defer stop()
	w := e.paused("soon", 30*time.Minute, 1)
	e.setPolicy(core.RetentionPolicy{Enabled: true, PausedFor: time.Hour, WarnBefore: 20 * time.Minute})
	if rep := e.tick(); rep.Warned != 0 {
		t.Fatalf("warned 30 minutes before the delete with a 20-minute window: %+v", rep)
	}
	e.clock.Advance(15 * time.Minute)
	if rep := e.tick(); rep.Warned != 1 {
		t.Fatalf("not warned inside the window: %+v", rep)
	}
	select {
	case n := <-notices:
		if n.Kind != core.NoticeRetentionWarning || n.WorkspaceID != w.ID || !n.DeleteAfter.Equal(w.PausedAt.Add(time.Hour)) {
			t.Fatalf("notice %+v", n)
		}
	default:
		t.Fatal("no notice published")
	}
	if rep := e.tick(); rep.Warned != 0 {
		t.Fatalf("warned twice: %+v", rep)
	}
	if len(e.audit(core.AuditRetentionWarn)) != 1 {
		t.Fatal("warning not audited once")
	}
}

// TestRetentionNeverDeletesOnTheDesktop: without scheduled deletion (the
// desktop) a policy is stored and previewed, but nothing is scheduled and
// no tick deletes, however long the clock runs.
func TestRetentionNeverDeletesOnTheDesktop(t *testing.T) {
	e := newRetEnv(t, false)
	w := e.paused("desk", 48*time.Hour, 1)
	e.setPolicy(core.RetentionPolicy{Enabled: true, PausedFor: time.Hour})
	pv, err := e.svc.PreviewRetention(e.ctx, "", core.RetentionPolicy{AccountID: retAccount, Enabled: true, PausedFor: time.Hour})
	if err != nil || len(pv.Workspaces) != 1 || pv.ScheduledDeletion {
		t.Fatalf("desktop preview %+v, %v; want the workspace listed and scheduled_deletion false", pv, err)
	}
	for range 5 {
		e.clock.Advance(24 * time.Hour)
		if rep := e.tick(); rep.Started+rep.Warned != 0 {
			t.Fatalf("desktop tick acted: %+v", rep)
		}
	}
	if ws, ok := e.ws(w.ID); !ok || !ws.DeleteAfter.IsZero() || len(e.prov.deleted()) != 0 {
		t.Fatalf("desktop: workspace %+v present=%v, deletes %v", ws, ok, e.prov.deleted())
	}
	if st := e.svc.RetentionStatus(); st.ScheduledDeletion || st.Ticks != 5 {
		t.Fatalf("status %+v", st)
	}
}

// TestRetentionPolicyInput: bad policies are refused with the field named
// and change nothing; another owner's account is not found.
func TestRetentionPolicyInput(t *testing.T) {
	e := newRetEnv(t, true)
	nan := -1.0
	for _, p := range []core.RetentionPolicy{
		{Enabled: true},
		{Enabled: true, PausedFor: -time.Second},
		{Enabled: true, PausedFor: time.Hour, WarnBefore: -time.Second},
		{Enabled: true, PausedFor: 20 * 365 * 24 * time.Hour},
		{Enabled: true, PausedFor: time.Hour, StoragePricePerGiBMonth: &nan},
	} {
		p.AccountID = retAccount
		_, err := e.svc.SetRetentionPolicy(e.ctx, "", p)
		if core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), "_") {
			t.Errorf("%+v: %v; want an invalid error naming the field", p, err)
		}
	}
	if p, err := e.svc.RetentionPolicyOf(e.ctx, "", retAccount); err != nil || p.Enabled || p.WarnBefore != core.DefaultRetentionWarning {
		t.Fatalf("policy after refusals: %+v %v", p, err)
	}
	if _, err := e.svc.SetRetentionPolicy(e.ctx, "someone-else", core.RetentionPolicy{AccountID: retAccount}); core.KindOf(err) != core.KindNotFound {
		t.Fatalf("another owner's account: %v", err)
	}
	if _, err := e.svc.RetentionPolicyOf(e.ctx, "", "acc_nope"); core.KindOf(err) != core.KindNotFound {
		t.Fatalf("unknown account: %v", err)
	}
}

// afterClaim runs a function right after each successful claim.
type afterClaim struct {
	core.RetentionStore
	then func(id string)
}

func (a afterClaim) ClaimRetention(ctx context.Context, id, holder string, now time.Time, lease time.Duration) (core.RetentionClaim, bool, error) {
	c, ok, err := a.RetentionStore.ClaimRetention(ctx, id, holder, now, lease)
	if ok && a.then != nil {
		a.then(id)
	}
	return c, ok, err
}

// TestRetentionSkipsAWorkspaceResumedAfterItsClaim: a person resumes the
// workspace after the tick claimed it and before the tick took its lock;
// the re-check under the lock sees it and nothing is deleted.
func TestRetentionSkipsAWorkspaceResumedAfterItsClaim(t *testing.T) {
	var e *retEnv
	e = newRetEnvWith(t, true, func(rs core.RetentionStore) core.RetentionStore {
		return afterClaim{RetentionStore: rs, then: func(id string) {
			if _, err := e.svc.Resume(e.ctx, "", id); err != nil {
				t.Errorf("resume after the claim: %v", err)
				return
			}
			testsupport.Until(t, 10*time.Second, "the resume to finish", func() bool {
				ws, _ := e.ws(id)
				return ws.State == core.StateRunning
			})
			// The resume saves its outcome just before it lets the lock
			// go; taking the lock once waits for that.
			if _, err := e.svc.SetKeep(e.ctx, "", id, false); err != nil {
				t.Error(err)
			}
		}}
	})
	w := e.paused("woken", 2*time.Hour, 1)
	e.setPolicy(core.RetentionPolicy{Enabled: true, PausedFor: time.Hour})
	if rep := e.tick(); rep.Started != 0 || rep.Skipped != 1 {
		t.Fatalf("tick %+v; want the resumed workspace skipped", rep)
	}
	if ws, _ := e.ws(w.ID); ws.State != core.StateRunning || len(e.prov.deleted()) != 0 {
		t.Fatalf("workspace %s, provider deletes %v", ws.State, e.prov.deleted())
	}
	skips := e.audit(core.AuditRetentionSkip)
	if len(skips) != 1 || !strings.Contains(skips[0].Outcome, "running") {
		t.Fatalf("skip entries %+v", skips)
	}
}
