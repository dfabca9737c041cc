package uibridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/canvasapp/companion/core"
)

// inventingProvider emulates a provider whose list makes up new box ids on
// every call.
type inventingProvider struct {
	mu  sync.Mutex
	seq int
}

func (p *inventingProvider) Describe(context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{Name: "liar", Version: "1", Kind: "wasm", Capabilities: core.Capabilities{List: true}}, nil
}

func (p *inventingProvider) List(context.Context, core.Account) ([]core.Box, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []core.Box
	for range 200 {
		p.seq++
		out = append(out, core.Box{ID: fmt.Sprintf("made-up-%d", p.seq), State: core.StateRunning})
	}
	return out, nil
}

func (p *inventingProvider) Get(_ context.Context, _ core.Account, id string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindNotFound, "box %s not found", id)
}

func (p *inventingProvider) Create(context.Context, core.Account, core.CreateSpec) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "no")
}

func (p *inventingProvider) Suspend(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "no")
}

func (p *inventingProvider) Resume(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "no")
}

func (p *inventingProvider) Delete(context.Context, core.Account, string) error {
	return core.Errorf(core.KindInvalid, "no")
}

// TestAccountFlagOnListAndStream: an account whose provider invents boxes
// carries its flag in GET /v1/accounts, and the stream tells connected
// clients with an "account" message.
func TestAccountFlagOnListAndStream(t *testing.T) {
	reg := &core.Registry{}
	reg.Register("liar", &inventingProvider{})
	e := newEnvWith(t, openStore(t), reg, nil)
	ctx := context.Background()
	acct := core.Account{ID: "acc_liar", Provider: "liar", Label: "liar"}
	if _, err := e.svc.EnsureAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	c := e.mustDial("")
	if m := readMsg(t, c); m.Type != "snapshot" {
		t.Fatalf("first message %+v", m)
	}
	for range core.InventPasses + 1 {
		if err := e.svc.ReconcileAccount(ctx, acct); err != nil {
			t.Fatal(err)
		}
	}
	var flagged *Account
	for i := 0; flagged == nil && i < 1000; i++ {
		m := readMsg(t, c)
		if m.Type == "account" && m.Account != nil && m.Account.Flag != nil {
			flagged = m.Account
		}
	}
	if flagged == nil || flagged.ID != acct.ID || flagged.Flag.Code != core.FlagInventingBoxes || flagged.Status.State != "ok" {
		t.Fatalf("no account message with the flag: %+v", flagged)
	}

	resp, body := e.do("GET", "/v1/accounts", "")
	var got struct {
		Accounts []json.RawMessage `json:"accounts"`
	}
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 200 || len(got.Accounts) != 1 {
		t.Fatalf("accounts: %d %s", resp.StatusCode, body)
	}
	var a struct {
		Status struct {
			State    string  `json:"state"`
			LastOKAt *string `json:"last_ok_at"`
		} `json:"status"`
		Flag *struct {
			Code    string  `json:"code"`
			Message string  `json:"message"`
			Since   *string `json:"since"`
		} `json:"flag"`
	}
	if err := json.Unmarshal(got.Accounts[0], &a); err != nil {
		t.Fatal(err)
	}
	if a.Status.State != "ok" || a.Status.LastOKAt == nil || a.Flag == nil || a.Flag.Code != "inventing_boxes" ||
		!strings.Contains(a.Flag.Message, "stopped adopting") || a.Flag.Since == nil {
		t.Fatalf("account JSON without status or flag: %s", got.Accounts[0])
	}
	if n := len(e.svc.Workspaces("")); n != core.AdoptPerPass*core.InventPasses {
		t.Fatalf("%d workspaces, want the bound %d", n, core.AdoptPerPass*core.InventPasses)
	}
}
