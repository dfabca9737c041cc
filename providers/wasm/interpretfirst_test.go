package wasm

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
)

func interpretFirst(t *testing.T, cacheDir string, progress *progressLog) hostOpt {
	return func(c *Config) {
		compileOnUse(t, cacheDir, progress)(c)
		c.InterpretFirst = true
	}
}

// TestInterpretFirst: a first-party module never compiled on this cache
// answers its first use from the interpreter (nothing cached yet, and it
// says so); calls made without pause all succeed across the switch to the
// compiled code, which is cached, and the interpreted module is closed;
// a restart on the same cache loads the compiled code and interprets
// nothing.
func TestInterpretFirst(t *testing.T) {
	cache := t.TempDir()
	progress := &progressLog{}
	e, a := startEmbedded(t, goodWasm, interpretFirst(t, cache, progress))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acct := core.Account{ID: "acc", Provider: "good", Config: map[string]string{"mode": "static"}}

	if boxes, err := a.List(ctx, acct); err != nil || len(boxes) == 0 {
		t.Fatalf("first list: %v %v", boxes, err)
	}
	li, err := a.Wait(ctx)
	if err != nil || li.CompileCache != "off" {
		t.Fatalf("first use: %+v %v, want the interpreted module (no cache)", li, err)
	}
	first := a.mod.Load()
	if !strings.Contains(progress.String(), "provider module good runs interpreted while it compiles") {
		t.Fatalf("progress lines: %q", progress.String())
	}

	var calls, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := a.List(ctx, acct); err != nil {
					failed.Add(1)
					t.Errorf("list during the switch: %v", err)
				}
				calls.Add(1)
			}
		})
	}
	testsupport.Until(t, 90*time.Second, "the module runs compiled", func() bool { return a.mod.Load() != first })
	after := calls.Load()
	testsupport.Until(t, 30*time.Second, "calls on the compiled module", func() bool { return calls.Load() > after+20 })
	close(stop)
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d of %d calls failed across the switch", failed.Load(), calls.Load())
	}
	testsupport.Until(t, 30*time.Second, "the interpreted module's memory released", func() bool {
		return first.Memory().CommittedBytes == 0
	})
	if !strings.Contains(progress.String(), "compiled provider module good in ") || !strings.Contains(e.logs.String(), "provider module now runs compiled") {
		t.Fatalf("progress %q\nlogs %s", progress.String(), e.logs.String())
	}
	if cacheFiles(t, cache) == 0 {
		t.Fatal("the compiled code was not cached")
	}

	// A restart on the same cache: compiled code from the cache, said nothing.
	loadsFromCacheSilently(ctx, t, func(p *progressLog) hostOpt { return interpretFirst(t, cache, p) })
}

// TestInterpretFirstClosedWhileCompiling: a host closed while the compiled
// twin is still compiling closes cleanly, and the module answers that it
// was unloaded.
func TestInterpretFirstClosedWhileCompiling(t *testing.T) {
	e, a := startEmbedded(t, goodWasm, interpretFirst(t, t.TempDir(), &progressLog{}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if li, err := a.Wait(ctx); err != nil || li.CompileCache != "off" {
		t.Fatalf("first use: %+v %v", li, err)
	}
	if err := e.host.Close(ctx); err != nil {
		t.Fatalf("close while compiling: %v", err)
	}
	_, err := a.List(ctx, core.Account{ID: "acc", Provider: "good", Config: map[string]string{"mode": "static"}})
	mustKind(t, err, core.KindUnavailable, "unloaded")
}

// TestInterpretFirstNotForInstalled: an installed module, whose calls may
// need more CPU than first-party ones, always waits for the compiler.
func TestInterpretFirstNotForInstalled(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.host.Install(ctx, goodWasm); err != nil {
		t.Fatal(err)
	}
	progress := &progressLog{}
	h, err := New(Config{CacheDir: filepath.Join(t.TempDir(), "fresh"), ModulesDir: filepath.Join(e.dir, "modules"), Pins: e.pins,
		CompileOnUse: true, InterpretFirst: true, Progress: progress.add})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	a, err := h.Load(ctx, "good")
	if err != nil {
		t.Fatal(err)
	}
	if li, err := a.Wait(ctx); err != nil || li.CompileCache != "miss" {
		t.Fatalf("installed module: %+v %v, want compiled (a cache miss)", li, err)
	}
	if strings.Contains(progress.String(), "interpreted") {
		t.Fatalf("progress %q", progress.String())
	}
}
