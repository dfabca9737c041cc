package db_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/canvasapp/companion/core"
)

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestSharedModuleBytes: a module stored through one replica's store is
// read, bytes and hash together, through another's; replacing it replaces
// the bytes, a bare pin carries none (and may be filled once, only with
// bytes of its hash), and deleting the pin deletes the bytes.
func TestSharedModuleBytes(t *testing.T) {
	ctx := context.Background()
	a, b := openPGPair(t)
	v1, v2 := []byte("\x00asm module one"), []byte("\x00asm module two")
	if hashes, err := b.ModuleHashes(ctx); err != nil || len(hashes) != 0 {
		t.Fatalf("hashes of a new database: %v %v", hashes, err)
	}
	if err := a.PutModule(ctx, "good", sumOf(v1), []byte(`{"name":"good"}`), v1); err != nil {
		t.Fatal(err)
	}
	sum, bin, err := b.ModuleBytes(ctx, "good")
	if err != nil || sum != sumOf(v1) || !bytes.Equal(bin, v1) {
		t.Fatalf("B reads %q %q %v", sum, bin, err)
	}
	if _, m, err := b.ModulePin(ctx, "good"); err != nil || string(m) != `{"name":"good"}` {
		t.Fatalf("B reads the pin's manifest %q %v", m, err)
	}
	if err := a.PutModule(ctx, "good", sumOf(v2), nil, v2); err != nil {
		t.Fatal(err)
	}
	if sum, bin, _ := b.ModuleBytes(ctx, "good"); sum != sumOf(v2) || !bytes.Equal(bin, v2) {
		t.Fatalf("after the reinstall B reads %q %q", sum, bin)
	}
	if hashes, err := b.ModuleHashes(ctx); err != nil || len(hashes) != 1 || hashes["good"] != sumOf(v2) {
		t.Fatalf("hashes: %v %v", hashes, err)
	}
	// Bytes that are not the pinned ones are refused.
	if err := a.PutModule(ctx, "bad", sumOf(v1), nil, v2); !core.IsKind(err, core.KindInvalid) {
		t.Fatalf("PutModule with bytes of another hash: %v", err)
	}
	if err := a.PutModule(ctx, "bad", sumOf(v1), nil, nil); !core.IsKind(err, core.KindInvalid) {
		t.Fatalf("PutModule without bytes: %v", err)
	}
	// A bare pin (from before the bytes were kept, or copied from SQLite)
	// has none; a replacement by a bare pin drops the old bytes.
	if err := a.PutModulePin(ctx, "good", sumOf(v1), nil); err != nil {
		t.Fatal(err)
	}
	if sum, bin, err := b.ModuleBytes(ctx, "good"); err != nil || sum != sumOf(v1) || bin != nil {
		t.Fatalf("bare pin reads %q %q %v, want no bytes", sum, bin, err)
	}
	if ok, err := b.FillModuleBytes(ctx, "good", sumOf(v2), v2); ok || err != nil {
		t.Fatalf("filled a pin of another hash: %v %v", ok, err)
	}
	if _, err := b.FillModuleBytes(ctx, "good", sumOf(v1), v2); !core.IsKind(err, core.KindInvalid) {
		t.Fatalf("fill with bytes that do not hash to the pin: %v", err)
	}
	if ok, err := b.FillModuleBytes(ctx, "good", sumOf(v1), v1); !ok || err != nil {
		t.Fatalf("fill: %v %v", ok, err)
	}
	if ok, _ := a.FillModuleBytes(ctx, "good", sumOf(v1), v1); ok {
		t.Fatal("filled twice")
	}
	if _, bin, _ := a.ModuleBytes(ctx, "good"); !bytes.Equal(bin, v1) {
		t.Fatalf("filled bytes read %q", bin)
	}
	if err := b.DeleteModulePin(ctx, "good"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.ModuleBytes(ctx, "good"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("bytes of a removed module: %v", err)
	}
	if hashes, _ := a.ModuleHashes(ctx); len(hashes) != 0 {
		t.Fatalf("hashes after removal: %v", hashes)
	}
}
