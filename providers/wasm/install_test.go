package wasm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/providers/wasm/sdk"
)

func TestInstallPinLoadRemove(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	sum, err := e.host.Install(ctx, goodWasm)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Name != "good" || sum.Version != "1.0.0" || sum.ABIVersion != 1 || sum.SHA256 != sha256Hex(goodWasm) {
		t.Fatalf("summary %+v", sum)
	}
	if strings.Join(sum.Hosts, " ") != "https://api.good.example:443 https://files.good.example:443" {
		t.Fatalf("hosts %v", sum.Hosts)
	}
	if len(sum.Credentials) != 2 ||
		sum.Credentials[0].Header != "Authorization: Bearer {token}" || strings.Join(sum.Credentials[0].Hosts, ",") != "https://api.good.example:443" ||
		sum.Credentials[1].Header != "X-Files-Key: {token}" || strings.Join(sum.Credentials[1].Hosts, ",") != "https://files.good.example:443" {
		t.Fatalf("credentials %+v", sum.Credentials)
	}
	text := sum.String()
	for _, want := range []string{"good 1.0.0", sum.SHA256, `Sends credential "token" as "Authorization: Bearer {token}" to https://api.good.example:443 only`, `the setting "api_url"`} {
		if !strings.Contains(text, want) {
			t.Fatalf("summary text lacks %q:\n%s", want, text)
		}
	}
	onDisk, err := os.ReadFile(filepath.Join(e.dir, "modules", "good.wasm"))
	if err != nil || sha256Hex(onDisk) != sum.SHA256 {
		t.Fatalf("module file: %v", err)
	}
	pinned, mjson, err := e.pins.ModulePin(ctx, "good")
	if err != nil || pinned != sum.SHA256 || !json.Valid(mjson) {
		t.Fatalf("pin: %q %v", pinned, err)
	}

	a, err := e.host.Load(ctx, "good")
	if err != nil {
		t.Fatal(err)
	}
	info, err := a.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.CompileCache != "hit" { // Install compiled it already
		t.Fatalf("load after install: compile_cache %s", info.CompileCache)
	}
	if _, err := a.List(ctx, core.Account{ID: "a", Config: map[string]string{"mode": "static"}}); err != nil {
		t.Fatal(err)
	}
	mods, err := e.host.Installed(ctx)
	if err != nil || len(mods) != 1 || mods[0].Status != "ok" || !mods[0].Loaded || mods[0].Builtin {
		t.Fatalf("installed: %+v %v", mods, err)
	}

	// Someone changes the bytes on disk: listed as changed, never loaded.
	tampered := append([]byte(nil), onDisk...)
	tampered[len(tampered)/2] ^= 0xff
	if err := os.WriteFile(filepath.Join(e.dir, "modules", "good.wasm"), tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	mods, _ = e.host.Installed(ctx)
	if mods[0].Status != "changed" {
		t.Fatalf("tampered module listed as %s", mods[0].Status)
	}
	_, err = e.host.Load(ctx, "good")
	mustKind(t, err, core.KindConflict, "changed since it was installed", sum.SHA256)
	adapters, err := e.host.LoadInstalled(ctx)
	if len(adapters) != 0 || err == nil || !strings.Contains(err.Error(), "changed since it was installed") {
		t.Fatalf("LoadInstalled: %d adapters, %v", len(adapters), err)
	}

	// A restart with a fresh host and the same data dir: the pinned,
	// unchanged module loads from the cache.
	if err := os.WriteFile(filepath.Join(e.dir, "modules", "good.wasm"), onDisk, 0o600); err != nil {
		t.Fatal(err)
	}
	restarted, err := New(Config{CacheDir: sharedDir, ModulesDir: filepath.Join(e.dir, "modules"), Pins: e.pins})
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close(ctx)
	adapters, err = restarted.LoadInstalled(ctx)
	if err != nil || len(adapters) != 1 {
		t.Fatalf("%d adapters, %v", len(adapters), err)
	}
	if info, err := adapters[0].Wait(ctx); err != nil || info.CompileCache != "hit" {
		t.Fatalf("%+v %v", info, err)
	}

	if err := e.host.Remove(ctx, "good"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "modules", "good.wasm")); !os.IsNotExist(err) {
		t.Fatalf("module file left behind: %v", err)
	}
	_, _, err = e.pins.ModulePin(ctx, "good")
	mustKind(t, err, core.KindNotFound)
	_, err = e.host.Load(ctx, "good")
	mustKind(t, err, core.KindNotFound, "not installed")
	mustKind(t, e.host.Remove(ctx, "good"), core.KindNotFound)
	if _, ok := e.host.Adapter("good"); ok {
		t.Fatal("removed module still loaded")
	}
}

func TestInstallRefusals(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.host.LoadEmbedded(watModule(t, "spin", nil)); err != nil {
		t.Fatal(err)
	}
	withName := func(name string) []byte {
		return watModule(t, "spin", func(m map[string]any) { m["name"] = name })
	}
	cases := []struct {
		name     string
		bin      []byte
		kind     core.ErrorKind
		contains []string
	}{
		{"reserved", withName("docker"), core.KindConflict, []string{"built-in provider"}},
		{"first-party", withName("spin"), core.KindConflict, []string{"first-party"}},
		{"no manifest", watRaw["spin"], core.KindInvalid, []string{"no companion.manifest section"}},
		{"not wasm", []byte("#!/bin/sh\necho hi\n"), core.KindInvalid, []string{"not a WebAssembly binary"}},
		{"no abi export", watModule(t, "no_abi", nil), core.KindInvalid, []string{"does not export companion_abi_version"}},
		{"capability without export", watModule(t, "minimal", func(m map[string]any) {
			m["capabilities"] = map[string]any{"list": true, "suspend": true}
		}), core.KindInvalid, []string{"capabilities.suspend", "companion_suspend"}},
		{"memory below the module's minimum", repack(t, goodWasm, func(m map[string]any) {
			m["limits"] = map[string]any{"memory_mib": 1}
		}), core.KindInvalid, []string{"needs more memory than its manifest allows", "limits.memory_mib = 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.host.Install(ctx, c.bin)
			mustKind(t, err, c.kind, c.contains...)
			if names, _ := e.pins.ListModulePins(ctx); len(names) != 0 {
				t.Fatalf("refused module pinned: %v", names)
			}
			if entries, _ := os.ReadDir(filepath.Join(e.dir, "modules")); len(entries) != 0 {
				t.Fatalf("refused module stored: %v", entries)
			}
		})
	}
	// Two manifests in one file are ambiguous.
	twice := append(append([]byte(nil), watModule(t, "minimal", nil)...), watModule(t, "minimal", nil)[8:]...)
	_, err := e.host.Install(ctx, twice)
	mustKind(t, err, core.KindInvalid, "exactly one")
}

func TestABIVersionsAgree(t *testing.T) {
	versions := []int{ABIVersion, manifest.ABIVersion, sdk.ABIVersion}
	if versions[0] != versions[1] || versions[0] != versions[2] {
		t.Fatalf("host, manifest, sdk: %v", versions)
	}
}

func TestFirstPartyNeedsNoPin(t *testing.T) {
	h, err := New(Config{}) // no modules dir, no pin store, in-memory cache
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	a, err := h.LoadEmbedded(goodWasm)
	if err != nil {
		t.Fatal(err)
	}
	info, err := a.Wait(context.Background())
	if err != nil || info.CompileCache != "off" {
		t.Fatalf("%+v %v", info, err)
	}
	if !a.Builtin() || !a.Summary().Builtin {
		t.Fatal("not marked builtin")
	}
	_, err = h.Install(context.Background(), goodWasm)
	mustKind(t, err, core.KindUnavailable, "not configured")
	mods, err := h.Installed(context.Background())
	if err != nil || len(mods) != 1 || !mods[0].Builtin || !mods[0].Loaded {
		t.Fatalf("%+v %v", mods, err)
	}
}

// repack returns bin with its manifest edited.
func repack(t testing.TB, bin []byte, edit func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(mustManifest(t, bin), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := Pack(bin, mustJSON(t, m))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInspectLeavesNoCompiledCode(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	e := newEnv(t, func(c *Config) { c.CacheDir = cache })
	before := e.host.cacheEntries()
	s, err := e.host.Inspect(context.Background(), goodWasm)
	if err != nil || s.Name != "good" || s.SHA256 == "" {
		t.Fatalf("inspect: %+v %v", s, err)
	}
	if after := e.host.cacheEntries(); after != before {
		t.Fatalf("inspect left compiled code behind: %d cache entries, had %d", after, before)
	}
	if _, err := e.host.Install(context.Background(), goodWasm); err != nil {
		t.Fatal(err)
	}
	if e.host.cacheEntries() <= before {
		t.Fatal("install did not keep the compiled code for the load that follows")
	}
}
