package core_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
)

// emuProvider emulates a cloud provider's API in memory: the one part of
// these tests that is not real. Lists can be held (per account, or all of
// them behind a gate), fail, or invent new box ids on every call.
type emuProvider struct {
	name  string
	creds bool

	mu          sync.Mutex
	boxes       map[string]map[string]core.Box // account id ("*": every account) → box id → box
	listErr     map[string]error               // "*": every account
	hold        map[string]chan struct{}       // account id → closed to let its lists answer
	gate        chan struct{}                  // if set, every list takes a token first
	invent      int                            // ids a list makes up on every call
	calls       map[string]int
	answered    map[string]int
	inflight    int
	maxInflight int
	seq         int
}

func newEmu(name string) *emuProvider {
	return &emuProvider{name: name, boxes: map[string]map[string]core.Box{}, listErr: map[string]error{},
		hold: map[string]chan struct{}{}, calls: map[string]int{}, answered: map[string]int{}}
}

func (p *emuProvider) Describe(context.Context) (core.ProviderInfo, error) {
	info := core.ProviderInfo{Name: p.name, Version: "1", Kind: "wasm",
		Capabilities: core.Capabilities{List: true, Suspend: true, Delete: true}}
	if p.creds {
		info.Credentials = []core.CredentialSpec{{Name: "token"}}
	}
	return info, nil
}

func (p *emuProvider) addBox(acct, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.boxes[acct] == nil {
		p.boxes[acct] = map[string]core.Box{}
	}
	p.boxes[acct][id] = core.Box{ID: id, Name: id, State: core.StateRunning}
}

// addOwnedBox adds a box whose owner label names owner, as an adapter
// labels a box made through a shared account.
func (p *emuProvider) addOwnedBox(acct, id, owner string) {
	p.addBox(acct, id)
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.boxes[acct][id]
	b.Labels = map[string]string{core.LabelOwner: owner}
	p.boxes[acct][id] = b
}

func (p *emuProvider) removeBox(acct, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.boxes[acct], id)
}

func (p *emuProvider) count(f func() int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return f()
}

func (p *emuProvider) List(ctx context.Context, acct core.Account) ([]core.Box, error) {
	p.mu.Lock()
	p.calls[acct.ID]++
	p.inflight++
	p.maxInflight = max(p.maxInflight, p.inflight)
	hold, gate := p.hold[acct.ID], p.gate
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inflight--
		p.answered[acct.ID]++
		p.mu.Unlock()
	}()
	for _, ch := range []chan struct{}{gate, hold} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, &core.Error{Kind: core.KindUnavailable, Message: p.name + " did not answer in time", Err: ctx.Err()}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.listErr[acct.ID]; err != nil {
		return nil, err
	}
	if err := p.listErr["*"]; err != nil {
		return nil, err
	}
	var out []core.Box
	for _, b := range p.boxes[acct.ID] {
		out = append(out, b)
	}
	for _, b := range p.boxes["*"] { // boxes every account sees
		out = append(out, b)
	}
	for range p.invent {
		p.seq++
		out = append(out, core.Box{ID: fmt.Sprintf("made-up-%d", p.seq), State: core.StateRunning})
	}
	return out, nil
}

func (p *emuProvider) Get(_ context.Context, acct core.Account, id string) (core.Box, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.boxes[acct.ID][id]; ok {
		return b, nil
	}
	return core.Box{}, core.Errorf(core.KindNotFound, "box %s not found", id)
}

func (p *emuProvider) Create(context.Context, core.Account, core.CreateSpec) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "the emulator does not create")
}

func (p *emuProvider) Suspend(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "the emulator does not suspend")
}

func (p *emuProvider) Resume(context.Context, core.Account, string) (core.Box, error) {
	return core.Box{}, core.Errorf(core.KindInvalid, "the emulator does not resume")
}

func (p *emuProvider) Delete(context.Context, core.Account, string) error {
	return core.Errorf(core.KindInvalid, "the emulator does not delete")
}

// memSecrets stands in for the keyring, which these tests do not exercise.
type memSecrets struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memSecrets) Set(_ context.Context, k, v string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = v
	return nil
}

func (s *memSecrets) Get(_ context.Context, k string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	if !ok {
		return "", core.Errorf(core.KindNotFound, "no secret %s", k)
	}
	return v, nil
}

func (s *memSecrets) Delete(_ context.Context, k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}

func (s *memSecrets) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// clockEnv is a service on a real SQLite file whose clock only the test
// moves.
type clockEnv struct {
	t       *testing.T
	path    string
	store   *db.Store
	reg     *core.Registry
	clock   *fakeclock.Clock
	secrets *memSecrets
	svc     *core.Service
	logs    *bytes.Buffer
	passes  chan passDone
	pending []passDone // passes seen while waiting for another account's
	// wrap, if set, wraps the store the service is given (to observe it).
	wrap func(core.Store) core.Store
	// ownersExist, if set, is the service's Config.OwnersExist.
	ownersExist core.OwnersExist
}

type passDone struct {
	account string
	err     error
}

func newClockEnv(t *testing.T) *clockEnv {
	t.Helper()
	return newClockEnvOwners(t, nil)
}

// newClockEnvOwners is newClockEnv for a service told which users exist
// (Config.OwnersExist), as serve with sign-in is.
func newClockEnvOwners(t *testing.T, exist core.OwnersExist) *clockEnv {
	t.Helper()
	e := &clockEnv{t: t, path: filepath.Join(t.TempDir(), "companion.db"), reg: &core.Registry{},
		clock: fakeclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)), secrets: &memSecrets{m: map[string]string{}},
		logs: &bytes.Buffer{}, passes: make(chan passDone, 10000), ownersExist: exist}
	e.open()
	return e
}

func (e *clockEnv) open() {
	e.t.Helper()
	ctx := context.Background()
	st, err := db.Open(ctx, e.path)
	if err != nil {
		e.t.Fatal(err)
	}
	var store core.Store = st
	if e.wrap != nil {
		store = e.wrap(st)
	}
	svc, err := core.NewService(ctx, core.Config{Store: store, Providers: e.reg, Secrets: e.secrets, Clock: e.clock, OwnersExist: e.ownersExist,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		e.t.Fatal(err)
	}
	e.store, e.svc = st, svc
	e.t.Cleanup(e.close)
}

func (e *clockEnv) close() {
	if e.svc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.svc.Close(ctx)
	e.store.Close()
	e.svc, e.store = nil, nil
}

func (e *clockEnv) account(id, provider string) core.Account {
	e.t.Helper()
	a := core.Account{ID: id, Provider: provider, Label: id}
	if _, err := e.svc.EnsureAccount(context.Background(), a); err != nil {
		e.t.Fatal(err)
	}
	return a
}

// run starts the reconciler until the test ends.
func (e *clockEnv) run(cfg core.ReconcileConfig) {
	cfg.AfterPass = func(id string, err error) { e.passes <- passDone{id, err} }
	runReconciler(e.t, e.svc, cfg)
}

// waitPass waits for the reconciler to finish a pass over account (the
// oldest one not waited for yet).
func (e *clockEnv) waitPass(account string) passDone {
	e.t.Helper()
	for i, p := range e.pending {
		if p.account == account {
			e.pending = append(e.pending[:i], e.pending[i+1:]...)
			return p
		}
	}
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	for {
		select {
		case p := <-e.passes:
			if p.account == account {
				return p
			}
			e.pending = append(e.pending, p)
		case <-guard.C:
			e.t.Fatalf("no pass over %s; logs:\n%s", account, e.logs)
		}
	}
}

// eventually polls cond until it holds, failing after a deadline.
func (e *clockEnv) eventually(what string, cond func() bool) {
	e.t.Helper()
	if err := testsupport.PollErr(30*time.Second, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("%s never happened", what)
	}); err != nil {
		e.t.Fatalf("%v; logs:\n%s", err, e.logs)
	}
}

func (e *clockEnv) workspacesOf(account string) []core.Workspace {
	var out []core.Workspace
	for _, ws := range e.svc.Workspaces("") {
		if ws.AccountID == account {
			out = append(out, ws)
		}
	}
	return out
}
