package wasm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
)

// mustModuleError asserts err carries a ModuleError naming module and op
// (and field, when given).
func mustModuleError(t *testing.T, err error, module, op, field string) {
	t.Helper()
	var me *ModuleError
	if !errors.As(err, &me) {
		t.Fatalf("not a named module error: %v", err)
	}
	if me.Module != module || me.Op != op || me.Field != field {
		t.Fatalf("module error names (%s, %s, %s), want (%s, %s, %s)", me.Module, me.Op, me.Field, module, op, field)
	}
}

// Modules whose declarations alone would make the compiler or the runtime
// allocate gigabytes are refused by inspect, install and load, before
// anything is compiled; the host keeps serving.
func TestHostileBinariesRefusedBeforeCompiling(t *testing.T) {
	e := newEnv(t)
	good := e.load(t, goodWasm)
	cases := []struct {
		module   string
		contains []string
	}{
		{"huge_table", []string{"table 0 minimum", "100000000 elements", "limit of 100000"}},
		{"table_max", []string{"table 0 maximum", "10000000 elements"}},
		{"many_locals", []string{"locals of function", "limit of 10000"}},
		{"big_body", []string{"body of function", "limit of 262144 bytes"}},
		{"big_data", []string{"data segments together", "limit of 16777216"}},
	}
	for _, c := range cases {
		t.Run(c.module, func(t *testing.T) {
			bin := watModule(t, c.module, nil)
			name := watName(c.module)
			start := time.Now()
			_, err := e.host.Inspect(context.Background(), bin)
			mustKind(t, err, core.KindInvalid, append([]string{"provider module " + name + " was refused"}, c.contains...)...)
			mustModuleError(t, err, name, "inspect", "")
			_, err = e.host.Install(context.Background(), bin)
			mustKind(t, err, core.KindInvalid, c.contains...)
			mustModuleError(t, err, name, "install", "")
			if pinned, _ := e.pins.ListModulePins(context.Background()); len(pinned) != 0 {
				t.Fatalf("refused module pinned: %v", pinned)
			}
			a, err := e.host.LoadEmbedded(bin)
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.List(context.Background(), core.Account{ID: "x"})
			mustKind(t, err, core.KindInternal, append([]string{"could not be loaded"}, c.contains...)...)
			mustModuleError(t, err, name, "load", "")
			t.Logf("refused in %s", time.Since(start))
			servesStill(t, good, nil, nil)
		})
	}
}

func watName(module string) string {
	b := []byte(module)
	for i, c := range b {
		if c == '_' {
			b[i] = '-'
		}
	}
	return string(b)
}

// A table without a maximum (as Go emits) is capped at the table limit, so
// table.grow asking for a billion elements fails inside the guest.
func TestTableGrowCapped(t *testing.T) {
	e := newEnv(t)
	a := e.load(t, watModule(t, "table_grow", nil))
	boxes, err := a.List(context.Background(), core.Account{ID: "x"})
	if err != nil || len(boxes) != 0 {
		t.Fatalf("table.grow was not refused: %v %v", boxes, err)
	}
	if st := a.Stats(); st.Discarded != 0 || st.Idle != 1 {
		t.Fatalf("%+v", st)
	}
}

// An instance that grows its linear memory to the maximum is discarded
// after its call, and its memory is unmapped; the pool's memory never
// passes its budget.
func TestInstanceAtMaximumMemoryDiscarded(t *testing.T) {
	e := newEnv(t)
	a := e.load(t, watModule(t, "grow_memory", func(m map[string]any) {
		m["limits"] = map[string]any{"memory_mib": 16, "call_timeout_ms": 5000}
	}))
	for i := 0; i < 3; i++ {
		if _, err := a.List(context.Background(), core.Account{ID: "x"}); err != nil {
			t.Fatal(err)
		}
		st, mem := a.Stats(), a.Memory()
		if st.Idle != 0 || st.Discarded != int64(i+1) {
			t.Fatalf("grown instance pooled: %+v", st)
		}
		if mem.CommittedBytes != 0 {
			t.Fatalf("discarded instance's memory still mapped: %+v", mem)
		}
		if mem.PeakBytes < 16<<20 || mem.PeakBytes > mem.BudgetBytes {
			t.Fatalf("peak %d outside [16 MiB, budget %d]", mem.PeakBytes, mem.BudgetBytes)
		}
	}
}

// Removing a module unmaps the memory its pooled instances held.
func TestMemoryReturnedOnRemove(t *testing.T) {
	e := newEnv(t)
	bin := watModule(t, "static_list", nil)
	if _, err := e.host.Install(context.Background(), bin); err != nil {
		t.Fatal(err)
	}
	a, err := e.host.Load(context.Background(), "static-list")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.List(context.Background(), core.Account{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	held := a.Memory()
	if held.CommittedBytes == 0 || e.host.Memory().CommittedBytes != held.CommittedBytes {
		t.Fatalf("pooled instance holds no memory: %+v (host %+v)", held, e.host.Memory())
	}
	if err := e.host.Remove(context.Background(), "static-list"); err != nil {
		t.Fatal(err)
	}
	if m := a.Memory(); m.CommittedBytes != 0 {
		t.Fatalf("memory held after removal: %+v", m)
	}
	if m := e.host.Memory(); m.CommittedBytes != 0 {
		t.Fatalf("host still holds memory: %+v", m)
	}
}

// Inspect runs no module code: a module whose _initialize traps inspects
// fine, and install (which runs it in the sandbox) refuses it by name.
func TestInspectRunsNoCode(t *testing.T) {
	e := newEnv(t)
	bin := watModule(t, "init_trap", nil)
	if _, err := e.host.Inspect(context.Background(), bin); err != nil {
		t.Fatalf("inspect ran the module: %v", err)
	}
	_, err := e.host.Install(context.Background(), bin)
	mustKind(t, err, core.KindInvalid, "provider module init-trap was refused", "unreachable")
	mustModuleError(t, err, "init-trap", "companion_abi_version", "")
}

// A describe that contradicts the manifest is refused at install, naming
// the field; a module loaded without install (first-party) fails describe
// with a named error instead of an opaque one.
func TestLyingDescribe(t *testing.T) {
	e := newEnv(t)
	bin := watModule(t, "lying_describe", nil)
	if _, err := e.host.Inspect(context.Background(), bin); err != nil {
		t.Fatal(err)
	}
	_, err := e.host.Install(context.Background(), bin)
	mustKind(t, err, core.KindInvalid, "lying-describe was refused", `describe says version "6.6.6"`, `"0.0.1"`)
	mustModuleError(t, err, "lying-describe", "describe", "version")

	bin = watModule(t, "lying_describe", func(m map[string]any) { m["capabilities"] = map[string]any{"list": true} })
	a := e.load(t, bin)
	_, err = a.Describe(context.Background())
	mustKind(t, err, core.KindInternal, "lying-describe", "describe", "version")
	mustModuleError(t, err, "lying-describe", "describe", "version")
}

// A guest allocator that answers 0 or an offset outside memory is refused
// at install and, at run time, fails the call with a named error.
func TestBrokenAllocator(t *testing.T) {
	e := newEnv(t)
	good := e.load(t, goodWasm)
	for module, want := range map[string]string{
		"alloc_zero": "companion_alloc(4096) returned 0",
		"alloc_oob":  "outside the module's memory",
	} {
		t.Run(module, func(t *testing.T) {
			name := watName(module)
			bin := watModule(t, module, nil)
			_, err := e.host.Install(context.Background(), bin)
			mustKind(t, err, core.KindInvalid, name+" was refused", want)
			mustModuleError(t, err, name, "describe", "")

			a := e.load(t, bin)
			_, err = a.List(context.Background(), core.Account{ID: "x"})
			mustKind(t, err, core.KindInternal, "provider module "+name, "during list", want)
			mustModuleError(t, err, name, "list", "")
			if st := a.Stats(); st.Discarded != 1 || st.Idle != 0 {
				t.Fatalf("instance with a broken allocator kept: %+v", st)
			}
			servesStill(t, good, nil, nil)
		})
	}
}

// Removing a module while a call spins in it waits for the call (stopped
// at its deadline) before unmapping the memory under it.
func TestRemoveDuringCall(t *testing.T) {
	e := newEnv(t)
	if _, err := e.host.Install(context.Background(), watModule(t, "spin", nil)); err != nil {
		t.Fatal(err)
	}
	a, err := e.host.Load(context.Background(), "spin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.List(context.Background(), core.Account{ID: "x"})
		done <- err
	}()
	testsupport.Until(t, 10*time.Second, "the call to start", func() bool { return a.Stats().Calls > 0 })
	if err := e.host.Remove(context.Background(), "spin"); err != nil {
		t.Fatal(err)
	}
	// The call ran to its deadline (it was not cut off by an unmapped
	// memory, which would have crashed the process).
	select {
	case err := <-done:
		mustKind(t, err, core.KindUnavailable, "did not finish list")
	case <-time.After(10 * time.Second):
		t.Fatal("the call never returned")
	}
	if m := a.Memory(); m.CommittedBytes != 0 {
		t.Fatalf("memory held after removal: %+v", m)
	}
}
