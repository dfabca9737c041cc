package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/wire"
	"github.com/canvasapp/companion/providers/wasm/modules"
)

// builtinStatic is the same list logic as the good module's mode=static,
// written as a built-in Go adapter would.
type builtinStatic struct{}

func (builtinStatic) List(_ context.Context, _ core.Account) ([]core.Box, error) {
	return []core.Box{
		{ID: "b-1", Name: "one", State: core.StateRunning, Labels: map[string]string{core.LabelWorkspace: "ws-1"}, CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
		{ID: "b-2", Name: "two", State: core.StatePaused, PausedAt: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)},
		{ID: "b-3", Name: "three", State: core.StateRunning, Size: &core.Size{Bytes: 1 << 30, Source: core.SizeProviderAPIUsed}},
	}, nil
}

// processList is the process-per-call model: start the program, write the
// op input on stdin, read the result from stdout.
func processList(ctx context.Context, acct core.Account) ([]core.Box, error) {
	in, _ := json.Marshal(wire.NewInput(time.Now().Add(time.Minute), &acct))
	cmd := exec.CommandContext(ctx, procBinary)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var env struct {
		OK wire.ListOut `json:"ok"`
	}
	if err := json.Unmarshal(out, &env); err != nil {
		return nil, err
	}
	boxes := make([]core.Box, 0, len(env.OK.Boxes))
	for i := range env.OK.Boxes {
		b, err := env.OK.Boxes[i].ToCore()
		if err != nil {
			return nil, err
		}
		boxes = append(boxes, b)
	}
	return boxes, nil
}

// BenchmarkListPerCall compares one list op with no HTTP through a pooled
// Wasm adapter (call timeout on, close-on-context-done on) running the Go
// SDK module, a built-in Go adapter and a process started per call; and,
// for scale, the same op in a hand-written module. Goal: Wasm ≤ 250 µs per
// call and ≥ 30× faster than process-per-call (wasm-speedup-x, measured
// against the Go SDK module).
func BenchmarkListPerCall(b *testing.B) {
	e := newEnv(b)
	a := e.load(b, goodWasm)
	acct := core.Account{ID: "acc-bench", Config: map[string]string{"mode": "static"}}
	ctx := context.Background()
	check := func(boxes []core.Box, err error) {
		if err != nil {
			b.Fatal(err)
		}
		if len(boxes) != 3 {
			b.Fatalf("%d boxes", len(boxes))
		}
	}
	var wasmPerCall time.Duration
	b.Run("wasm-pooled-wat", func(b *testing.B) {
		// A hand-written module doing no work: the host's own overhead.
		w := e.load(b, watModule(b, "static_list", func(m map[string]any) { m["name"] = "static-list" }))
		check(w.List(ctx, acct))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			check(w.List(ctx, acct))
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/call")
	})
	b.Run("wasm-pooled", func(b *testing.B) {
		check(a.List(ctx, acct))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			check(a.List(ctx, acct))
		}
		wasmPerCall = b.Elapsed() / time.Duration(b.N)
		b.ReportMetric(float64(wasmPerCall.Microseconds()), "µs/call")
	})
	b.Run("builtin-go", func(b *testing.B) {
		var p builtinStatic
		b.ReportAllocs()
		for b.Loop() {
			check(p.List(ctx, acct))
		}
	})
	b.Run("process-per-call", func(b *testing.B) {
		for b.Loop() {
			check(processList(ctx, acct))
		}
		perCall := b.Elapsed() / time.Duration(b.N)
		b.ReportMetric(float64(perCall.Microseconds()), "µs/call")
		if wasmPerCall > 0 {
			b.ReportMetric(float64(perCall)/float64(wasmPerCall), "wasm-speedup-x")
		}
	})
}

// BenchmarkCompile compares a cold compile with a compilation-cache hit
// (a new Host each time, as after a restart), per module.
func BenchmarkCompile(b *testing.B) {
	mjson, err := os.ReadFile("examples/minimal-wat/manifest.json")
	if err != nil {
		b.Fatal(err)
	}
	minimal, err := Pack(watRaw["minimal"], mjson)
	if err != nil {
		b.Fatal(err)
	}
	type module struct {
		name string
		bin  []byte
	}
	all := []module{{"good-go", goodWasm}, {"minimal-wat", minimal}}
	// The first-party modules, when scripts/build-modules.sh has built them.
	for _, m := range modules.Embedded() {
		all = append(all, module{m.Name, m.Wasm})
	}
	for _, m := range all {
		warm := b.TempDir()
		loadOnce := func(b *testing.B, dir string) LoadInfo {
			h, err := New(Config{CacheDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			a, err := h.LoadEmbedded(m.bin)
			if err != nil {
				b.Fatal(err)
			}
			info, err := a.Wait(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			return info
		}
		loadOnce(b, warm)
		for _, mode := range []string{"cold", "cache-hit"} {
			b.Run(mode+"/"+m.name, func(b *testing.B) {
				var total time.Duration
				for i := 0; b.Loop(); i++ {
					dir := warm
					if mode == "cold" {
						dir = filepath.Join(b.TempDir(), "c")
					}
					info := loadOnce(b, dir)
					if want := map[string]string{"cold": "miss", "cache-hit": "hit"}[mode]; info.CompileCache != want {
						b.Fatalf("compile_cache %s, want %s", info.CompileCache, want)
					}
					total += info.CompileTime
				}
				b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "compile-ms")
				b.ReportMetric(float64(len(m.bin))/1e6, "module-MB")
			})
		}
	}
}

// BenchmarkFirstUse times each first-party module's first use on a fresh
// cache, from loading it to the end of the wait its first call makes
// (the module prepared, one instance warmed, its describe checked): with
// the compiler alone, and running interpreted while the compiler works
// in the background (Config.InterpretFirst). Closing the host, which waits
// for that background compile, is not timed.
func BenchmarkFirstUse(b *testing.B) {
	ctx := context.Background()
	for _, m := range modules.Embedded() {
		for _, mode := range []string{"compiler", "interpreter-first"} {
			b.Run(mode+"/"+m.Name, func(b *testing.B) {
				var total time.Duration
				for b.Loop() {
					h, err := New(Config{CacheDir: filepath.Join(b.TempDir(), "c"), CompileOnUse: true, InterpretFirst: mode == "interpreter-first"})
					if err != nil {
						b.Fatal(err)
					}
					began := time.Now()
					a, err := h.LoadEmbedded(m.Wasm)
					if err != nil {
						b.Fatal(err)
					}
					info, err := a.Wait(ctx)
					if err != nil {
						b.Fatal(err)
					}
					total += time.Since(began)
					if want := map[string]string{"compiler": "miss", "interpreter-first": "off"}[mode]; info.CompileCache != want {
						b.Fatalf("compile_cache %s, want %s", info.CompileCache, want)
					}
					if err := h.Close(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N), "first-use-ms")
			})
		}
	}
}

// BenchmarkInstanceMemory reports the memory of one warm instance of the
// Go module: its linear memory, and the host heap it takes.
func BenchmarkInstanceMemory(b *testing.B) {
	const n = 8
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, func(c *Config) { c.PoolSize = n })
		a := e.load(b, goodWasm)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		if err := a.mod.Load().Prewarm(context.Background(), n); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		var linear uint64
		sizes := a.mod.Load().MemoryBytes()
		for _, s := range sizes {
			linear += uint64(s)
		}
		if len(sizes) != n {
			b.Fatalf("%d warm instances", len(sizes))
		}
		// The first instance existed before the measurement.
		b.ReportMetric(float64(linear)/float64(n), "linear-bytes/instance")
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(n-1), "heap-bytes/instance")
		e.host.Close(context.Background())
		b.StartTimer()
	}
}
