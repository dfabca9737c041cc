package wasm

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
)

// sharedHosts starts a PostgreSQL cluster of its own (this package's other
// tests need none) and returns two hosts on one database, each with its
// own modules directory, as two serve replicas have, and their stores.
func sharedHosts(t *testing.T) (a, b *Host, sa, sb *db.PGStore, dirA, dirB string) {
	t.Helper()
	c, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	url := c.NewDatabase(t)
	ctx := context.Background()
	open := func() (*Host, *db.PGStore, string) {
		s, err := db.OpenPostgres(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		dir := t.TempDir()
		h, err := New(Config{CacheDir: sharedDir, ModulesDir: filepath.Join(dir, "modules"), Pins: s,
			Logger: slog.New(slog.DiscardHandler), ReservedNames: []string{"docker"}, CompileOnUse: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h.Close(cctx)
		})
		return h, s, dir
	}
	a, sa, dirA = open()
	b, sb, dirB = open()
	return a, b, sa, sb, dirA, dirB
}

func adapterNames(list []*Adapter) []string {
	var out []string
	for _, a := range list {
		out = append(out, a.Name())
	}
	return out
}

// TestSharedModulesFollowEachOther: a module installed through one host
// on a shared store is loaded by the other at its next Sync, from the
// database (neither host has a file), and runs there; removed through the
// first, it is unloaded by the second. A module whose stored bytes do not
// load is reported once, not at every Sync; a pin from before bytes were
// kept in the database is filled from the one host that has its file, and
// then loads on the other, which was waiting for it quietly.
func TestSharedModulesFollowEachOther(t *testing.T) {
	ctx := context.Background()
	hA, hB, sA, _, dirA, dirB := sharedHosts(t)
	if !hA.Shared() {
		t.Fatal("a host with a shared store says it is not shared")
	}

	if _, err := hA.Install(ctx, goodWasm); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{dirA, dirB} {
		if _, err := os.Stat(filepath.Join(dir, "modules", "good.wasm")); !os.IsNotExist(err) {
			t.Fatalf("a shared install wrote a module file in %s: %v", dir, err)
		}
	}
	if _, ok := hB.Adapter("good"); ok {
		t.Fatal("B loaded good before any Sync")
	}
	loaded, removed, err := hB.Sync(ctx)
	if err != nil || !slices.Equal(adapterNames(loaded), []string{"good"}) || len(removed) != 0 {
		t.Fatalf("B's Sync after A's install: loaded %v removed %v err %v", adapterNames(loaded), removed, err)
	}
	a, ok := hB.Adapter("good")
	if !ok {
		t.Fatal("B does not hold good after Sync")
	}
	if _, err := a.Wait(ctx); err != nil {
		t.Fatalf("good on B: %v", err)
	}
	if info, err := a.Describe(ctx); err != nil || info.Name != "good" {
		t.Fatalf("good's describe on B: %+v %v", info, err)
	}
	if loaded, removed, err := hB.Sync(ctx); len(loaded)+len(removed) != 0 || err != nil {
		t.Fatalf("a second Sync with nothing new: %v %v %v", adapterNames(loaded), removed, err)
	}
	mods, err := hB.Installed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(mods, func(m Module) bool { return m.Name == "good" }); i < 0 || mods[i].Status != "ok" || !mods[i].Loaded {
		t.Fatalf("B's Installed: %+v", mods)
	}

	if err := hA.Remove(ctx, "good"); err != nil {
		t.Fatal(err)
	}
	loaded, removed, err = hB.Sync(ctx)
	if err != nil || len(loaded) != 0 || !slices.Equal(removed, []string{"good"}) {
		t.Fatalf("B's Sync after A's removal: loaded %v removed %v err %v", adapterNames(loaded), removed, err)
	}
	if _, ok := hB.Adapter("good"); ok {
		t.Fatal("B still holds the removed module")
	}

	// Bytes that are no module: reported by the first Sync only.
	junk := []byte("\x00asm\x01\x00\x00\x00 not a provider")
	if err := sA.PutModule(ctx, "junk", sha256Hex(junk), nil, junk); err != nil {
		t.Fatal(err)
	}
	if loaded, _, err := hB.Sync(ctx); err == nil || len(loaded) != 0 {
		t.Fatalf("Sync of a broken module: loaded %v err %v", adapterNames(loaded), err)
	}
	if loaded, _, err := hB.Sync(ctx); err != nil || len(loaded) != 0 {
		t.Fatalf("the broken module was reported again: loaded %v err %v", adapterNames(loaded), err)
	}
	if err := sA.DeleteModulePin(ctx, "junk"); err != nil {
		t.Fatal(err)
	}

	// A pin without bytes (installed before they were kept in the
	// database): B has the file, loads it and fills the bytes in; A,
	// which never had the file, then loads it from the database.
	m, mjson, err := parseModule(goodWasm)
	if err != nil {
		t.Fatal(err)
	}
	if err := sA.PutModulePin(ctx, m.Name, sha256Hex(goodWasm), mjson); err != nil {
		t.Fatal(err)
	}
	if _, _, err := hA.Sync(ctx); err == nil {
		t.Fatal("A loaded a pin with no bytes and no file")
	}
	if loaded, _, err := hA.Sync(ctx); err != nil || len(loaded) != 0 {
		t.Fatalf("a module waiting for its bytes was reported again: %v %v", adapterNames(loaded), err)
	}
	if err := os.MkdirAll(filepath.Join(dirB, "modules"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, "modules", "good.wasm"), goodWasm, 0o600); err != nil {
		t.Fatal(err)
	}
	if loaded, _, err := hB.Sync(ctx); err != nil || !slices.Equal(adapterNames(loaded), []string{"good"}) {
		t.Fatalf("B's Sync of the old pin: loaded %v err %v", adapterNames(loaded), err)
	}
	if _, bin, err := sA.ModuleBytes(ctx, "good"); err != nil || sha256Hex(bin) != sha256Hex(goodWasm) {
		t.Fatalf("the old pin's bytes were not filled in: %v", err)
	}
	if loaded, _, err := hA.Sync(ctx); err != nil || !slices.Equal(adapterNames(loaded), []string{"good"}) {
		t.Fatalf("A's Sync once the bytes were filled in: loaded %v err %v", adapterNames(loaded), err)
	}
}
