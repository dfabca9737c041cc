package e2e

import (
	"fmt"
	"testing"
	"time"

	modalemu "github.com/canvasapp/companion/e2e/emulators/modal"
	"github.com/canvasapp/companion/internal/testsupport"
)

// holdNext makes the emulator hold the next SandboxCreate, before it acts
// or after (the sandbox made, the answer kept), until companion is
// killed; it returns once the call is held.
func (f *modalFarm) holdNext(after bool) func() {
	held := make(chan struct{})
	f.emu.AddFault(&modalemu.Fault{Method: "SandboxCreate", Count: 1, Hold: make(chan struct{}), After: after, Held: held})
	return func() {
		f.t.Helper()
		select {
		case <-held:
		case <-time.After(90 * time.Second):
			f.t.Fatal("companion never called SandboxCreate")
		}
	}
}

// running is the emulator's running sandboxes of workspace id.
func (f *modalFarm) running(id string) []modalemu.Sandbox {
	var out []modalemu.Sandbox
	for _, sb := range f.emu.Sandboxes() {
		if sb.State == modalemu.StateRunning && sb.Tags["companion.workspace"] == id {
			out = append(out, sb)
		}
	}
	return out
}

// settledLists waits until companion listed Modal n more times: by then a
// reconcile that would adopt a sandbox has run.
func (f *modalFarm) settledLists(n int) {
	f.t.Helper()
	before := f.emu.Calls("SandboxList")
	testsupport.Poll(f.t, 60*time.Second, func() error {
		if got := f.emu.Calls("SandboxList") - before; got < n {
			return fmt.Errorf("%d lists of %d", got, n)
		}
		return nil
	})
}

// TestModalKillNineMidCreate crashes companion (SIGKILL) while Modal's
// SandboxCreate is held: before Modal made the sandbox, and after it made
// it but before companion had the answer. Restarted on the same data
// dir, companion finishes the journaled create with exactly one running
// sandbox for the workspace, reachable, adopted by no second workspace.
func TestModalKillNineMidCreate(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			f := newModalFarm(t)
			opts := options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}}
			p := start(t, opts)
			acct := f.account(p)
			wait := f.holdNext(after)
			var created struct{ Workspace workspace }
			p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "crashed"}, &created)
			id := created.Workspace.ID
			wait()
			p.kill()
			if n := len(f.running(id)); n != map[bool]int{false: 0, true: 1}[after] {
				t.Fatalf("%d sandboxes of %s at the crash", n, id)
			}

			p = start(t, opts)
			s := p.dial(-1)
			w := streamRunning(s, id)
			agentThroughCompanion(p, id, "after the crash")
			f.settledLists(2)
			onlyWorkspace(p, id, w.BoxID)
			if rs := f.running(id); len(rs) != 1 || rs[0].ID != w.BoxID || len(f.emu.Sandboxes()) != 1 {
				t.Fatalf("running sandboxes of %s: %+v (of %d), want only %s", id, rs, len(f.emu.Sandboxes()), w.BoxID)
			}
			if a := p.auditOf(id); !auditHas(a, "recovery", "create", "ok") {
				t.Errorf("audit lacks the recovered create: %+v", a)
			}
		})
	}
}

// TestModalKillNineMidResume crashes companion during a resume's
// SandboxCreate (the new sandbox from the snapshot), before and after
// Modal made it. Restarted, companion finishes the resume with exactly
// one new sandbox (a retried resume finds the one tagged with the box it
// replaces), the stream keeps the workspace id, the agent-server answers
// with the new key, and the old key is refused.
func TestModalKillNineMidResume(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			f := newModalFarm(t)
			opts := options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}}
			p := start(t, opts)
			acct := f.account(p)
			var created struct{ Workspace workspace }
			p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "resumed"}, &created)
			id := created.Workspace.ID
			old := p.waitState(id, "running", time.Minute).BoxID
			oldSB, _ := f.emu.Sandbox(old)
			oldKey := oldSB.Env["OH_SESSION_API_KEYS_0"]
			p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
			p.waitState(id, "paused", time.Minute)

			wait := f.holdNext(after)
			p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
			wait()
			p.kill()
			if n := len(f.running(id)); n != map[bool]int{false: 0, true: 1}[after] {
				t.Fatalf("%d running sandboxes at the crash", n)
			}

			p = start(t, opts)
			s := p.dial(-1)
			w := streamRunning(s, id)
			if w.BoxID == old {
				t.Fatalf("the workspace still names the paused box %s", old)
			}
			agentThroughCompanion(p, id, "after the crash")
			f.settledLists(2)
			onlyWorkspace(p, id, w.BoxID)
			rs := f.running(id)
			if len(rs) != 1 || rs[0].ID != w.BoxID || rs[0].Tags["companion.resumed_from"] != old || len(f.emu.Sandboxes()) != 2 {
				t.Fatalf("running sandboxes %+v of %d, want only %s resumed from %s", rs, len(f.emu.Sandboxes()), w.BoxID, old)
			}
			if code, err := f.direct(t, w.BoxID, oldKey); err != nil || code != 401 {
				t.Fatalf("the old key at the new sandbox: %d %v, want 401", code, err)
			}
		})
	}
}
