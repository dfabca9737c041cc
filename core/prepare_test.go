package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// preparingEmu is an emulated provider with a one-time local cost before
// its first call (as a Wasm module's compile), held until released.
type preparingEmu struct {
	*emuProvider
	called  chan struct{}
	release chan struct{}
}

func (p *preparingEmu) Prepare(ctx context.Context) error {
	close(p.called)
	select {
	case <-p.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestAddAccountWaitStartsAfterPrepare: adding an account first waits for
// the adapter to prepare (compile), however long that takes by the clock,
// and only then gives the provider's first list its AddAccountWait: a
// list that answers at once is checked, not left "checking".
func TestAddAccountWaitStartsAfterPrepare(t *testing.T) {
	e := newClockEnv(t)
	emu := &preparingEmu{emuProvider: newEmu("cloud"), called: make(chan struct{}), release: make(chan struct{})}
	emu.creds = true
	e.reg.Register("cloud", emu)
	type added struct {
		acct core.Account
		err  error
	}
	done := make(chan added, 1)
	go func() {
		a, err := e.svc.AddAccount(context.Background(), "", core.AddAccountRequest{Provider: "cloud", Credentials: map[string]string{"token": "t0ken"}})
		done <- added{a, err}
	}()
	select {
	case <-emu.called:
	case <-time.After(10 * time.Second):
		t.Fatal("AddAccount did not prepare the adapter")
	}
	e.clock.Advance(time.Minute) // a slow compile, by the clock
	if n := emu.count(func() int { return len(emu.calls) }); n != 0 {
		t.Fatalf("the provider was listed %d times before it was prepared", n)
	}
	close(emu.release)
	var got added
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("AddAccount did not answer after its list did")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	if st := e.svc.AccountStatusOf(got.acct.ID); st.State != core.AccountOK {
		t.Fatalf("an account whose first list answered at once is %+v, want ok", st)
	}
}
