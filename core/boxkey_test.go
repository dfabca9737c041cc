package core_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
)

// restorer is a snapshot-and-restore provider: every resume makes a new
// box. It records the agent key each create was given and reports an
// endpoint for running boxes.
type restorer struct {
	*emuProvider
	kmu  sync.Mutex
	keys []string
	n    int
}

func (p *restorer) Describe(context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{Name: p.name, Version: "1", Kind: "wasm",
		Capabilities: core.Capabilities{List: true, Suspend: true, SuspendKeepsFiles: true, Delete: true}}, nil
}

func (p *restorer) put(acct string, b core.Box) core.Box {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.boxes[acct] == nil {
		p.boxes[acct] = map[string]core.Box{}
	}
	p.boxes[acct][b.ID] = b
	return b
}

func (p *restorer) Create(_ context.Context, acct core.Account, spec core.CreateSpec) (core.Box, error) {
	p.kmu.Lock()
	p.keys = append(p.keys, spec.AgentKey)
	p.n++
	id := fmt.Sprintf("box-%d", p.n)
	p.kmu.Unlock()
	return p.put(acct.ID, core.Box{ID: id, State: core.StateRunning, Labels: map[string]string{core.LabelWorkspace: spec.WorkspaceID}}), nil
}

func (p *restorer) Suspend(_ context.Context, acct core.Account, id string) (core.Box, error) {
	b, err := p.Get(context.Background(), acct, id)
	if err != nil {
		return b, err
	}
	b.State = core.StatePaused
	return p.put(acct.ID, b), nil
}

func (p *restorer) Resume(_ context.Context, acct core.Account, id string) (core.Box, error) {
	b, err := p.Get(context.Background(), acct, id)
	if err != nil {
		return b, err
	}
	p.removeBox(acct.ID, id)
	p.kmu.Lock()
	p.n++
	b.ID = fmt.Sprintf("box-%d", p.n)
	p.kmu.Unlock()
	b.State = core.StateRunning
	return p.put(acct.ID, b), nil
}

func (p *restorer) Delete(_ context.Context, acct core.Account, id string) error {
	p.removeBox(acct.ID, id)
	return nil
}

func (p *restorer) Endpoint(_ context.Context, _ core.Account, id string) (core.Endpoint, error) {
	return core.Endpoint{URL: "https://8000-" + id + ".proxy.example", Headers: map[string]string{"X-Token": "t-" + id}}, nil
}

// TestAgentKeyFollowsTheWorkspace: the key companion makes at create goes
// to the adapter and into the secrets store (not the SQLite file), stays
// the workspace's when a resume maps it to a new box, is what AgentAccess
// hands out, and is removed when the workspace is deleted.
func TestAgentKeyFollowsTheWorkspace(t *testing.T) {
	ctx := context.Background()
	e := newClockEnv(t)
	p := &restorer{emuProvider: newEmu("restore")}
	e.reg.Register("restore", p)
	acct := e.account("acc-restore", "restore")
	wait := func(id string, st core.State) core.Workspace {
		var ws core.Workspace
		testsupport.Poll(t, 30*time.Second, func() error {
			var err error
			if ws, err = e.svc.Workspace("", id); err == nil && ws.State != st {
				err = fmt.Errorf("workspace is %s, want %s", ws.State, st)
			}
			return err
		})
		return ws
	}

	ws, err := e.svc.Create(ctx, "", core.CreateRequest{AccountID: acct.ID, Name: "keyed"})
	if err != nil {
		t.Fatal(err)
	}
	first := wait(ws.ID, core.StateRunning)
	key, err := e.secrets.Get(ctx, core.AgentKeyKey(ws.ID))
	if err != nil || len(key) != 64 || len(p.keys) != 1 || p.keys[0] != key {
		t.Fatalf("stored key %q (%v); adapter got %q", key, err, p.keys)
	}
	files, _ := filepath.Glob(e.path + "*") // the db, its WAL and shm
	if len(files) == 0 {
		t.Fatal("no database files to scan")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), key) {
			t.Fatalf("the agent key is in %s", f)
		}
	}

	if _, err := e.svc.Pause(ctx, "", ws.ID); err != nil {
		t.Fatal(err)
	}
	wait(ws.ID, core.StatePaused)
	if _, err := e.svc.AgentTarget(ctx, "", ws.ID, false); !core.IsKind(err, core.KindConflict) {
		t.Fatalf("agent access to a paused workspace: %v", err)
	}
	if _, err := e.svc.Resume(ctx, "", ws.ID); err != nil {
		t.Fatal(err)
	}
	moved := wait(ws.ID, core.StateRunning)
	if moved.BoxID == first.BoxID {
		t.Fatalf("resume did not remap the box (%s)", moved.BoxID)
	}
	acc, err := e.svc.AgentTarget(ctx, "", ws.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if acc.Key != key || acc.Endpoint.URL != "https://8000-"+moved.BoxID+".proxy.example" {
		t.Fatalf("after the remap: key kept %v, endpoint %s", acc.Key == key, acc.Endpoint.URL)
	}

	pv, err := e.svc.PreviewDelete(ctx, "", ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Delete(ctx, "", ws.ID, pv.Token); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 30*time.Second, func() error {
		if _, err := e.secrets.Get(ctx, core.AgentKeyKey(ws.ID)); !core.IsKind(err, core.KindNotFound) {
			return fmt.Errorf("key still stored after delete (%v)", err)
		}
		return nil
	})
}

// rotator issues its own agent-server keys (ProviderSessionKey) and makes
// a new one at every resume, keeping the box: the OpenHands runtime-api.
type rotator struct {
	restorer
}

func (p *rotator) Describe(context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{Name: p.name, Version: "1", Kind: "wasm", ProviderSessionKey: true,
		Capabilities: core.Capabilities{List: true, Suspend: true, SuspendKeepsFiles: true, ResumeSameIdentity: true, Delete: true}}, nil
}

func (p *rotator) Create(ctx context.Context, acct core.Account, spec core.CreateSpec) (core.Box, error) {
	b, err := p.restorer.Create(ctx, acct, spec)
	b.Key = "provider-key-1"
	return p.put(acct.ID, b), err
}

func (p *rotator) Resume(_ context.Context, acct core.Account, id string) (core.Box, error) {
	b, err := p.Get(context.Background(), acct, id)
	if err != nil {
		return b, err
	}
	p.kmu.Lock()
	p.n++
	b.Key = fmt.Sprintf("provider-key-%d", p.n)
	p.kmu.Unlock()
	b.State = core.StateRunning
	return p.put(acct.ID, b), nil
}

// TestProviderIssuedKeyFollowsTheBox: for a provider that issues its own
// keys, AgentAccess hands out the key the box reports, not the one
// companion generated, and the new one after a resume that rotated it.
func TestProviderIssuedKeyFollowsTheBox(t *testing.T) {
	ctx := context.Background()
	e := newClockEnv(t)
	p := &rotator{restorer{emuProvider: newEmu("rotate")}}
	e.reg.Register("rotate", p)
	acct := e.account("acc-rotate", "rotate")
	wait := func(id string, st core.State) {
		testsupport.Poll(t, 30*time.Second, func() error {
			ws, err := e.svc.Workspace("", id)
			if err == nil && ws.State != st {
				err = fmt.Errorf("workspace is %s, want %s", ws.State, st)
			}
			return err
		})
	}
	ws, err := e.svc.Create(ctx, "", core.CreateRequest{AccountID: acct.ID, Name: "rotating"})
	if err != nil {
		t.Fatal(err)
	}
	wait(ws.ID, core.StateRunning)
	acc, err := e.svc.AgentTarget(ctx, "", ws.ID, false)
	if err != nil || acc.Key != "provider-key-1" {
		t.Fatalf("agent access: key %q, %v; want the provider's", acc.Key, err)
	}
	if _, err := e.svc.Pause(ctx, "", ws.ID); err != nil {
		t.Fatal(err)
	}
	wait(ws.ID, core.StatePaused)
	if _, err := e.svc.Resume(ctx, "", ws.ID); err != nil {
		t.Fatal(err)
	}
	wait(ws.ID, core.StateRunning)
	after, _ := e.svc.Workspace("", ws.ID)
	acc, err = e.svc.AgentTarget(ctx, "", ws.ID, false)
	if err != nil || acc.Key == "provider-key-1" || !strings.HasPrefix(acc.Key, "provider-key-") || after.BoxID != ws.BoxID && ws.BoxID != "" {
		t.Fatalf("after resume: key %q, %v, box %s (was %s); want a new provider key on the same box", acc.Key, err, after.BoxID, ws.BoxID)
	}
}
