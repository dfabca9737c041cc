package wasm

import (
	"context"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// progressLog collects the host's progress lines.
type progressLog struct {
	mu    sync.Mutex
	lines []string
}

func (p *progressLog) add(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, line)
}

func (p *progressLog) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

func compileOnUse(t *testing.T, cacheDir string, progress *progressLog) hostOpt {
	return func(c *Config) {
		c.CacheDir = cacheDir
		c.CompileOnUse = true
		c.DeferCompile = true
		c.Progress = progress.add
	}
}

// startEmbedded loads bin as a first-party module on a new host
// configured by opt, and starts the host.
func startEmbedded(t *testing.T, bin []byte, opt hostOpt) (*env, *Adapter) {
	t.Helper()
	e := newEnv(t, opt)
	a, err := e.host.LoadEmbedded(bin)
	if err != nil {
		t.Fatal(err)
	}
	e.host.Start()
	return e, a
}

// cacheFiles counts the files under dir.
func cacheFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCompileOnUse: a loaded module is described from its manifest and
// compiles nothing (the cache dir stays empty, no compile line); its
// first call compiles it once, saying so before and with the duration
// after; a restart on the same cache compiles silently from the cache.
func TestCompileOnUse(t *testing.T) {
	cache := t.TempDir()
	progress := &progressLog{}
	e, a := startEmbedded(t, goodWasm, compileOnUse(t, cache, progress))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := a.Describe(ctx)
	if err != nil || info.Name != "good" || info.Kind != "wasm" {
		t.Fatalf("describe before use: %+v %v", info, err)
	}
	if mods, err := e.host.Installed(ctx); err != nil || len(mods) != 1 || mods[0].Name != "good" {
		t.Fatalf("installed: %+v %v", mods, err)
	}
	if n := cacheFiles(t, cache); n != 0 || progress.String() != "" {
		t.Fatalf("describing and listing compiled: %d cache files, progress %q", n, progress.String())
	}
	select {
	case <-a.ready:
		t.Fatal("the module loaded without being used")
	default:
	}

	// The first call compiles it.
	_, _ = a.List(ctx, core.Account{ID: "acc", Provider: "good"})
	li, err := a.Wait(ctx)
	if err != nil || li.CompileCache != "miss" {
		t.Fatalf("after the first call: %+v %v", li, err)
	}
	got := progress.String()
	if !strings.Contains(got, "compiling provider module good (") || !strings.Contains(got, "compiled provider module good in ") {
		t.Fatalf("progress lines: %q", got)
	}
	if cacheFiles(t, cache) == 0 {
		t.Fatal("nothing was written to the compile cache")
	}

	// Another host on the same cache: a hit, and nothing said.
	loadsFromCacheSilently(ctx, t, func(p *progressLog) hostOpt { return compileOnUse(t, cache, p) })
}

// loadsFromCacheSilently loads the good module on a new host configured by
// opt (around a cache the module was compiled into) and fails t unless it
// comes from the cache and nothing is said about compiling.
func loadsFromCacheSilently(ctx context.Context, t *testing.T, opt func(*progressLog) hostOpt) {
	t.Helper()
	progress := &progressLog{}
	e := newEnv(t, opt(progress))
	a, err := e.host.LoadEmbedded(goodWasm)
	if err != nil {
		t.Fatal(err)
	}
	if li, err := a.Wait(ctx); err != nil || li.CompileCache != "hit" || progress.String() != "" {
		t.Fatalf("load on the same cache: %+v %v, progress %q", li, err, progress.String())
	}
}

// TestCompileOnUseChecksDescribe: a module whose describe contradicts its
// manifest is described from the manifest until used; its first use
// compiles it, runs describe and refuses it, naming the field, and
// Describe reports that from then on.
func TestCompileOnUseChecksDescribe(t *testing.T) {
	_, a := startEmbedded(t, repack(t, goodWasm, func(m map[string]any) { m["version"] = "9.9.9" }), compileOnUse(t, t.TempDir(), &progressLog{}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if info, err := a.Describe(ctx); err != nil || info.Version != "9.9.9" {
		t.Fatalf("describe before use: %+v %v", info, err)
	}
	_, err := a.Wait(ctx)
	mustKind(t, err, core.KindInternal, "contradicts its manifest", `describe says version "1.0.0"`)
	_, err = a.Describe(ctx)
	mustKind(t, err, core.KindInternal, "contradicts its manifest")
}

// countedFile counts the bytes read through an embedded module's file.
type countedFile struct {
	fs.File
	n *atomic.Int64
}

func (f countedFile) Read(b []byte) (int, error) {
	n, err := f.File.Read(b)
	f.n.Add(int64(n))
	return n, err
}

func (f countedFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.(io.ReaderAt).ReadAt(b, off)
	f.n.Add(int64(n))
	return n, err
}

// TestLazyModuleReadsItsManifestOnly: a first-party module loaded lazily
// is described after reading its section headers and manifest, not its
// code; its SHA-256, once asked for, is the file's; its first call reads
// the whole file once and compiles it.
func TestLazyModuleReadsItsManifestOnly(t *testing.T) {
	e := newEnv(t, compileOnUse(t, t.TempDir(), &progressLog{}))
	var read atomic.Int64
	a, err := e.host.LoadEmbeddedLazy("good", func() (fs.File, error) {
		f, err := moduleFile(goodWasm)()
		return countedFile{File: f, n: &read}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.host.Start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if info, err := a.Describe(ctx); err != nil || info.Name != "good" {
		t.Fatalf("describe: %+v %v", info, err)
	}
	if n := read.Load(); n == 0 || n > int64(len(goodWasm))/20 {
		t.Fatalf("describing read %d bytes of a %d-byte module; want the manifest's few", n, len(goodWasm))
	}
	if got, want := a.Summary().SHA256, sha256Hex(goodWasm); got != want {
		t.Fatalf("SHA-256 %s, want %s", got, want)
	}
	before := read.Load()
	_, _ = a.List(ctx, core.Account{ID: "acc", Provider: "good"}) // a use, whatever it answers
	if li, err := a.Wait(ctx); err != nil || li.SHA256 != sha256Hex(goodWasm) {
		t.Fatalf("after the first call: %+v %v", li, err)
	}
	if n := read.Load() - before; n != int64(len(goodWasm)) {
		t.Fatalf("the first call read %d bytes, want the module's %d once", n, len(goodWasm))
	}
}
