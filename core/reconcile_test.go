package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// TestSlowAccountDoesNotDelayAnother: one account's list never answers;
// another account of the same provider still gets its passes on time, so a
// box deleted there is noticed at the next interval.
func TestSlowAccountDoesNotDelayAnother(t *testing.T) {
	e := newClockEnv(t)
	emu := newEmu("cloud")
	e.reg.Register("cloud", emu)
	slow, fast := e.account("acc-slow", "cloud"), e.account("acc-fast", "cloud")
	emu.hold[slow.ID] = make(chan struct{})
	t.Cleanup(func() { close(emu.hold[slow.ID]) })
	emu.addBox(fast.ID, "box-1")

	e.run(core.ReconcileConfig{Interval: 15 * time.Second})
	if p := e.waitPass(fast.ID); p.err != nil {
		t.Fatalf("first pass over the healthy account: %v", p.err)
	}
	list := e.workspacesOf(fast.ID)
	if len(list) != 1 || list[0].BoxID != "box-1" || list[0].State != core.StateRunning {
		t.Fatalf("healthy account's box not adopted: %+v", list)
	}
	e.eventually("the slow list starting", func() bool { return emu.count(func() int { return emu.calls[slow.ID] }) == 1 })

	emu.removeBox(fast.ID, "box-1")
	e.clock.Advance(20 * time.Second)
	if p := e.waitPass(fast.ID); p.err != nil {
		t.Fatalf("second pass: %v", p.err)
	}
	ws, err := e.svc.Workspace("", list[0].ID)
	if err != nil || ws.State != core.StateDeleted || !strings.Contains(ws.Error, "outside companion") {
		t.Fatalf("deleted box not noticed while another account's list hangs: %+v %v", ws, err)
	}
	if n := emu.count(func() int { return emu.answered[slow.ID] }); n != 0 {
		t.Fatalf("the held list answered %d times; the test lost its point", n)
	}
	if st := e.svc.AccountStatusOf(fast.ID); st.State != core.AccountOK || !st.LastOKAt.Equal(e.clock.Now()) {
		t.Fatalf("healthy account's status: %+v", st)
	}
	if st := e.svc.AccountStatusOf(slow.ID); st.State != core.AccountChecking {
		t.Fatalf("a never-answered account is %+v, want checking", st)
	}
}

// TestPerProviderLimit: with PerProvider 2, five accounts of one provider
// are listed at most two at a time, and an account of another provider is
// served while all of them wait.
func TestPerProviderLimit(t *testing.T) {
	e := newClockEnv(t)
	emu, other := newEmu("cloud"), newEmu("elsewhere")
	emu.gate = make(chan struct{})
	e.reg.Register("cloud", emu)
	e.reg.Register("elsewhere", other)
	var ids []string
	for _, id := range []string{"acc-1", "acc-2", "acc-3", "acc-4", "acc-5"} {
		ids = append(ids, e.account(id, "cloud").ID)
	}
	lone := e.account("acc-other", "elsewhere")

	e.run(core.ReconcileConfig{Interval: time.Hour, PerProvider: 2})
	if p := e.waitPass(lone.ID); p.err != nil {
		t.Fatal(p.err)
	}
	for released := 0; released < len(ids); released++ {
		want := min(2, len(ids)-released)
		e.eventually("lists reaching the provider's limit", func() bool { return emu.count(func() int { return emu.inflight }) == want })
		emu.gate <- struct{}{}
	}
	e.eventually("every account listed", func() bool {
		return emu.count(func() int {
			return emu.answered["acc-1"] + emu.answered["acc-2"] + emu.answered["acc-3"] + emu.answered["acc-4"] + emu.answered["acc-5"]
		}) == 5
	})
	if m := emu.count(func() int { return emu.maxInflight }); m != 2 {
		t.Fatalf("at most %d lists ran at once, want exactly the limit 2", m)
	}
	for _, id := range ids {
		if n := emu.count(func() int { return emu.calls[id] }); n != 1 {
			t.Fatalf("%s listed %d times in one interval", id, n)
		}
	}
}

// TestBackoffIsPerAccount: an account the provider rate-limits waits as
// long as it was told (Retry-After), while another account of the same
// provider keeps its interval.
func TestBackoffIsPerAccount(t *testing.T) {
	e := newClockEnv(t)
	emu := newEmu("cloud")
	e.reg.Register("cloud", emu)
	limited, healthy := e.account("acc-limited", "cloud"), e.account("acc-healthy", "cloud")
	emu.listErr[limited.ID] = &core.Error{Kind: core.KindRateLimited, Message: "slow down", RetryAfter: 10 * time.Minute}
	start := e.clock.Now()

	e.run(core.ReconcileConfig{Interval: 15 * time.Second, MaxBackoff: time.Minute})
	if p := e.waitPass(limited.ID); !core.IsKind(p.err, core.KindRateLimited) {
		t.Fatalf("rate-limited pass: %v", p.err)
	}
	e.waitPass(healthy.ID)
	st := e.svc.AccountStatusOf(limited.ID)
	if st.State != core.AccountFailing || st.Kind != core.KindRateLimited || st.NextAttemptAt.Before(start.Add(10*time.Minute)) {
		t.Fatalf("rate-limited account's status: %+v", st)
	}
	for range 6 {
		e.clock.Advance(20 * time.Second) // past the healthy account's jittered interval
		if p := e.waitPass(healthy.ID); p.err != nil {
			t.Fatal(p.err)
		}
	}
	if n := emu.count(func() int { return emu.calls[healthy.ID] }); n != 7 {
		t.Fatalf("healthy account listed %d times in 7 intervals", n)
	}
	if n := emu.count(func() int { return emu.calls[limited.ID] }); n != 1 {
		t.Fatalf("rate-limited account listed %d times before its Retry-After", n)
	}
	delete(emu.listErr, limited.ID)
	e.clock.Advance(10 * time.Minute)
	if p := e.waitPass(limited.ID); p.err != nil {
		t.Fatal(p.err)
	}
	if st := e.svc.AccountStatusOf(limited.ID); st.State != core.AccountOK || !st.NextAttemptAt.IsZero() {
		t.Fatalf("recovered account's status: %+v", st)
	}
}

// TestAdoptionIsBoundedPerPass: 60 boxes the account already had are
// adopted AdoptPerPass at a time, without a flag.
func TestAdoptionIsBoundedPerPass(t *testing.T) {
	e := newClockEnv(t)
	emu := newEmu("cloud")
	e.reg.Register("cloud", emu)
	acct := e.account("acc", "cloud")
	for i := range 60 {
		emu.addBox(acct.ID, "box-"+string(rune('A'+i/26))+string(rune('a'+i%26)))
	}
	ctx := context.Background()
	for _, want := range []int{core.AdoptPerPass, 2 * core.AdoptPerPass, 60, 60} {
		if err := e.svc.ReconcileAccount(ctx, acct); err != nil {
			t.Fatal(err)
		}
		if n := len(e.workspacesOf(acct.ID)); n != want {
			t.Fatalf("%d workspaces after a pass, want %d", n, want)
		}
	}
	if st := e.svc.AccountStatusOf(acct.ID); st.Flag != nil {
		t.Fatalf("an account with many real boxes was flagged: %+v", st.Flag)
	}
}

// TestInventingProviderIsFlagged: a provider that lists 500 new ids on
// every call is flagged after InventPasses passes and the store stops
// growing; the flag is in the store and survives a restart.
func TestInventingProviderIsFlagged(t *testing.T) {
	e := newClockEnv(t)
	emu := newEmu("liar")
	emu.invent = 500
	e.reg.Register("liar", emu)
	acct := e.account("acc", "liar")
	ctx := context.Background()
	events, stop := e.svc.SubscribeAccounts(16)
	defer stop()
	bound := core.AdoptPerPass * core.InventPasses
	for range 10 {
		if err := e.svc.ReconcileAccount(ctx, acct); err != nil {
			t.Fatal(err)
		}
		if n := len(e.workspacesOf(acct.ID)); n > bound {
			t.Fatalf("%d workspaces: adoption not bounded (at most %d)", n, bound)
		}
	}
	st := e.svc.AccountStatusOf(acct.ID)
	if st.Flag == nil || st.Flag.Code != core.FlagInventingBoxes || !strings.Contains(st.Flag.Message, "liar") {
		t.Fatalf("inventing provider not flagged: %+v", st)
	}
	if n := len(e.workspacesOf(acct.ID)); n != bound {
		t.Fatalf("%d workspaces, want exactly %d (%d passes of %d before the flag)", n, bound, core.InventPasses, core.AdoptPerPass)
	}
	var flagged bool
	for len(events) > 0 {
		ev := <-events
		flagged = flagged || (ev.Account.ID == acct.ID && ev.Status.Flag != nil)
	}
	if !flagged {
		t.Fatal("no account event carried the flag")
	}
	stored, err := e.store.AccountFlags(ctx)
	if err != nil || stored[acct.ID].Code != core.FlagInventingBoxes {
		t.Fatalf("flag not stored: %+v %v", stored, err)
	}

	e.close()
	e.open()
	if st := e.svc.AccountStatusOf(acct.ID); st.Flag == nil {
		t.Fatal("flag lost on restart")
	}
	for range 3 {
		if err := e.svc.ReconcileAccount(ctx, acct); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.workspacesOf(acct.ID)); n != bound {
		t.Fatalf("%d workspaces after restart: a flagged account adopted again", n)
	}
}

// TestAddAccountAnswersWithinTheWait: a provider whose first list hangs
// does not hold the request beyond AddAccountWait; the account is added
// in state checking, and when the list answers its outcome arrives as an
// account event and its boxes are adopted.
func TestAddAccountAnswersWithinTheWait(t *testing.T) {
	e := newClockEnv(t)
	emu := newEmu("cloud")
	emu.creds = true
	emu.gate = make(chan struct{}) // holds every list until the test lets one through
	emu.addBox("*", "box-1")
	e.reg.Register("cloud", emu)
	events, stop := e.svc.SubscribeAccounts(16)
	defer stop()

	type added struct {
		acct core.Account
		err  error
	}
	done := make(chan added, 1)
	go func() {
		a, err := e.svc.AddAccount(context.Background(), "", core.AddAccountRequest{Provider: "cloud", Credentials: map[string]string{"token": "t0ken"}})
		done <- added{a, err}
	}()
	// The list's call timeout and the answer's wait.
	if !e.clock.WaitForWaiters(2, 10*time.Second) {
		t.Fatal("AddAccount is not waiting on the clock")
	}
	select {
	case got := <-done:
		t.Fatalf("AddAccount answered before its wait was over: %+v", got)
	default:
	}
	e.clock.Advance(3 * time.Second)
	var got added
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("AddAccount did not answer once its wait was over")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	if st := e.svc.AccountStatusOf(got.acct.ID); st.State != core.AccountChecking || !strings.Contains(st.Message, "not answered") {
		t.Fatalf("new account's status while its first list runs: %+v", st)
	}
	if _, err := e.store.GetAccount(context.Background(), got.acct.ID); err != nil {
		t.Fatalf("account not stored: %v", err)
	}

	emu.gate <- struct{}{}
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	for ok := false; !ok; {
		select {
		case ev := <-events:
			ok = ev.Account.ID == got.acct.ID && ev.Status.State == core.AccountOK
		case <-guard.C:
			t.Fatalf("no event for the first list's outcome; logs:\n%s", e.logs)
		}
	}
	list := e.workspacesOf(got.acct.ID)
	if len(list) != 1 || list[0].BoxID != "box-1" {
		t.Fatalf("first list's boxes not adopted: %+v", list)
	}
}

// TestAddAccountRefusesBadCredentialsAtOnce: a list the provider answers
// within the wait with 401 refuses the account, and its token leaves the
// secret store.
func TestAddAccountRefusesBadCredentialsAtOnce(t *testing.T) {
	e := newClockEnv(t)
	emu := newEmu("cloud")
	emu.creds = true
	emu.listErr["*"] = core.Errorf(core.KindUnauthorized, "bad token")
	e.reg.Register("cloud", emu)
	_, err := e.svc.AddAccount(context.Background(), "", core.AddAccountRequest{Provider: "cloud", Credentials: map[string]string{"token": "wrong"}})
	if !core.IsKind(err, core.KindUnauthorized) || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("bad token: %v, want unauthorized saying so", err)
	}
	if list, _ := e.svc.Accounts(context.Background(), ""); len(list) != 0 {
		t.Fatalf("refused account stored: %+v", list)
	}
	if n := e.secrets.len(); n != 0 {
		t.Fatalf("%d secrets left behind by a refused account", n)
	}
}

// TestAddAccountLateRefusalArrivesAsEvent: when the 401 comes after the
// answer, the account stays, marked failing with the reason.
func TestAddAccountLateRefusalArrivesAsEvent(t *testing.T) {
	e := newClockEnv(t)
	emu := newEmu("cloud")
	emu.creds = true
	emu.gate = make(chan struct{})
	emu.listErr["*"] = core.Errorf(core.KindUnauthorized, "bad token")
	e.reg.Register("cloud", emu)
	events, stop := e.svc.SubscribeAccounts(16)
	defer stop()
	done := make(chan error, 1)
	var acct core.Account
	go func() {
		var err error
		acct, err = e.svc.AddAccount(context.Background(), "", core.AddAccountRequest{Provider: "cloud", Credentials: map[string]string{"token": "wrong"}})
		done <- err
	}()
	if !e.clock.WaitForWaiters(2, 10*time.Second) {
		t.Fatal("AddAccount is not waiting on the clock")
	}
	e.clock.Advance(3 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	emu.gate <- struct{}{}
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	for {
		select {
		case ev := <-events:
			if ev.Account.ID == acct.ID && ev.Status.State == core.AccountFailing {
				if ev.Status.Kind != core.KindUnauthorized || !strings.Contains(ev.Status.Message, "refused the credentials") {
					t.Fatalf("late refusal: %+v", ev.Status)
				}
				return
			}
		case <-guard.C:
			t.Fatalf("no event for the late refusal; logs:\n%s", e.logs)
		}
	}
}

// TestAddAccountCheckedInTime: a list that answers within the wait gives
// the answer state ok, and the boxes are adopted in the background.
func TestAddAccountCheckedInTime(t *testing.T) {
	e := newClockEnv(t)
	emu := newEmu("cloud")
	emu.creds = true
	emu.addBox("*", "box-1")
	e.reg.Register("cloud", emu)
	acct, err := e.svc.AddAccount(context.Background(), "", core.AddAccountRequest{Provider: "cloud", Credentials: map[string]string{"token": "t0ken"}})
	if err != nil {
		t.Fatal(err)
	}
	if st := e.svc.AccountStatusOf(acct.ID); st.State != core.AccountOK || !st.LastOKAt.Equal(e.clock.Now()) {
		t.Fatalf("status right after a checked add: %+v", st)
	}
	e.eventually("the first list's box adopted", func() bool { return len(e.workspacesOf(acct.ID)) == 1 })
}

// TestStartQuietUnlessSomethingIsWrong: after a start, an account's first
// good pass sends no account event; a failing one does.
func TestStartQuietUnlessSomethingIsWrong(t *testing.T) {
	e := newClockEnv(t)
	emu := newEmu("cloud")
	e.reg.Register("cloud", emu)
	good, bad := e.account("acc-good", "cloud"), e.account("acc-bad", "cloud")
	emu.listErr[bad.ID] = core.Errorf(core.KindUnavailable, "cloud is down")
	events, stop := e.svc.SubscribeAccounts(16)
	defer stop()
	e.run(core.ReconcileConfig{Interval: 15 * time.Second})
	e.waitPass(good.ID)
	e.waitPass(bad.ID)
	var got []core.AccountEvent
	for len(events) > 0 {
		got = append(got, <-events)
	}
	if len(got) != 1 || got[0].Account.ID != bad.ID || got[0].Status.State != core.AccountFailing || got[0].Status.Message != "cloud is down" {
		t.Fatalf("events after a start: %+v, want one for the failing account", got)
	}
}

// TestPersonActionListsAFailingAccountAtOnce: once the provider of an
// account whose lists failed is back (Docker restarted), the reconciler
// waits out its backoff; a person acting on one of the account's
// workspaces has it listed again at once, without the clock moving.
func TestPersonActionListsAFailingAccountAtOnce(t *testing.T) {
	e := newClockEnv(t)
	emu := newEmu("cloud")
	e.reg.Register("cloud", emu)
	acct := e.account("acc", "cloud")
	emu.addBox(acct.ID, "box-1")
	e.run(core.ReconcileConfig{Interval: 15 * time.Second})
	if p := e.waitPass(acct.ID); p.err != nil {
		t.Fatal(p.err)
	}
	list := e.workspacesOf(acct.ID)
	if len(list) != 1 {
		t.Fatalf("the box was not adopted: %+v", list)
	}

	emu.mu.Lock()
	emu.listErr[acct.ID] = &core.Error{Kind: core.KindUnavailable, Message: "the engine is down"}
	emu.mu.Unlock()
	e.clock.Advance(20 * time.Second)
	if p := e.waitPass(acct.ID); p.err == nil {
		t.Fatal("the pass while the provider is down succeeded")
	}
	if st := e.svc.AccountStatusOf(acct.ID); st.State != core.AccountFailing || !st.NextAttemptAt.After(e.clock.Now()) {
		t.Fatalf("status after a failed pass: %+v", st)
	}

	emu.mu.Lock()
	delete(emu.listErr, acct.ID)
	emu.mu.Unlock()
	// The person's action need not succeed (the emulator does not pause);
	// it is asking that matters.
	_, _ = e.svc.Pause(context.Background(), "", list[0].ID)
	if p := e.waitPass(acct.ID); p.err != nil {
		t.Fatalf("the pass after the person acted: %v", p.err)
	}
	if st := e.svc.AccountStatusOf(acct.ID); st.State != core.AccountOK {
		t.Fatalf("status after the provider came back and a person acted: %+v", st)
	}
}
