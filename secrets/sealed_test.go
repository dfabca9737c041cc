package secrets

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
)

// The sealed store's tests run on a real SQLite file (db.Store) in a
// temporary directory.

const tokenA = "tok-SEALED-a-5c1f9e0b7d"

func newKey(t *testing.T) *Key {
	t.Helper()
	k, err := ParseKey(GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func openStore(t *testing.T, dir string) (*db.Store, string) {
	t.Helper()
	s, err := db.Open(context.Background(), filepath.Join(dir, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	inst, err := s.InstanceID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s, inst
}

func openSealed(t *testing.T, rows SealedRows, inst string, k *Key) *Sealed {
	t.Helper()
	s, err := OpenSealed(context.Background(), rows, inst, k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealedRoundTripKeepsNoPlaintext(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, inst := openStore(t, dir)
	s := openSealed(t, store, inst, newKey(t))

	if err := s.Set(ctx, "account/a/token", tokenA); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "account/a/token"); err != nil || got != tokenA {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if err := s.Set(ctx, "account/a/token", tokenA+"2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "account/a/token"); got != tokenA+"2" {
		t.Fatalf("after overwrite Get = %q", got)
	}
	if _, err := s.Get(ctx, "account/b/token"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("Get of a missing key: %v, want not_found", err)
	}
	if err := s.Set(ctx, verifierKey, "x"); !core.IsKind(err, core.KindInvalid) {
		t.Fatalf("Set of the verifier: %v, want invalid", err)
	}
	if err := s.Delete(ctx, verifierKey); !core.IsKind(err, core.KindInvalid) {
		t.Fatalf("Delete of the verifier: %v, want invalid", err)
	}
	// The database files (WAL included: the store is still open) hold no
	// form of the token.
	files, _ := filepath.Glob(filepath.Join(dir, "companion.db*"))
	if len(files) < 2 {
		t.Fatalf("want the database and its WAL, have %v", files)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, form := range []string{tokenA, hex.EncodeToString([]byte(tokenA)), base64.StdEncoding.EncodeToString([]byte(tokenA))} {
			if bytes.Contains(b, []byte(form)) {
				t.Fatalf("%s holds the token", f)
			}
		}
	}
	if err := s.Delete(ctx, "account/a/token"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "account/a/token"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("second Delete: %v, want not_found", err)
	}
	// Reopened with the same key, the store opens.
	openSealed(t, store, inst, s.key)
}

func TestSealedRowsCannotBeSwappedOrEdited(t *testing.T) {
	ctx := context.Background()
	store, inst := openStore(t, t.TempDir())
	k := newKey(t)
	s := openSealed(t, store, inst, k)
	must(t, s.Set(ctx, "account/a/token", tokenA))
	must(t, s.Set(ctx, "account/b/token", "tok-b"))

	// Account a's row copied over account b's: b does not open, a does.
	id, sealedA, err := store.SealedSecret(ctx, "account/a/token")
	must(t, err)
	must(t, store.PutSealedSecret(ctx, "account/b/token", id, sealedA))
	if v, err := s.Get(ctx, "account/b/token"); !core.IsKind(err, core.KindInternal) || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("swapped row opened: %q, %v", v, err)
	}
	if v, _ := s.Get(ctx, "account/a/token"); v != tokenA {
		t.Fatalf("the original row no longer opens: %q", v)
	}

	// One bit of the ciphertext flipped, and the row cut short.
	for name, edit := range map[string]func([]byte) []byte{
		"flipped bit": func(b []byte) []byte { c := bytes.Clone(b); c[len(c)/2] ^= 1; return c },
		"truncated":   func(b []byte) []byte { return bytes.Clone(b[:len(b)-1]) },
		"nonce only":  func(b []byte) []byte { return bytes.Clone(b[:12]) },
	} {
		must(t, store.PutSealedSecret(ctx, "account/c/token", id, edit(sealedA)))
		if v, err := s.Get(ctx, "account/c/token"); err == nil || strings.Contains(err.Error(), tokenA) {
			t.Fatalf("%s: edited row opened: %q, %v", name, v, err)
		}
	}

	// The row moved to another data dir (another instance id) with the
	// same key does not open there.
	other, otherInst := openStore(t, t.TempDir())
	o := openSealed(t, other, otherInst, k)
	must(t, other.PutSealedSecret(ctx, "account/a/token", id, sealedA))
	if v, err := o.Get(ctx, "account/a/token"); err == nil {
		t.Fatalf("row opened in another data dir: %q", v)
	}

	// A row that names another key id is refused with the ids.
	must(t, store.PutSealedSecret(ctx, "account/d/token", "0000000000000000", sealedA))
	if _, err := s.Get(ctx, "account/d/token"); err == nil || !strings.Contains(err.Error(), "key id 0000000000000000") {
		t.Fatalf("row of another key id: %v", err)
	}
}

func TestSealedWrongKeyFailsAtOpen(t *testing.T) {
	ctx := context.Background()
	store, inst := openStore(t, t.TempDir())
	k := newKey(t)
	s := openSealed(t, store, inst, k)
	must(t, s.Set(ctx, "account/a/token", tokenA))

	wrong := newKey(t)
	_, err := OpenSealed(ctx, store, inst, wrong)
	if err == nil || !strings.Contains(err.Error(), "wrong secret key") || !strings.Contains(err.Error(), k.ID()) {
		t.Fatalf("OpenSealed with the wrong key: %v", err)
	}
	// A verifier forged to name the wrong key's id still does not open.
	_, sealed, err := store.SealedSecret(ctx, verifierKey)
	must(t, err)
	must(t, store.PutSealedSecret(ctx, verifierKey, wrong.ID(), sealed))
	if _, err := OpenSealed(ctx, store, inst, wrong); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("OpenSealed with a forged verifier: %v", err)
	}
	// Entries without a verifier: no key is trusted, nothing is written.
	must(t, store.DeleteSealedSecret(ctx, verifierKey))
	if _, err := OpenSealed(ctx, store, inst, k); err == nil || !strings.Contains(err.Error(), "no verifier") {
		t.Fatalf("OpenSealed without a verifier: %v", err)
	}
	if _, _, err := store.SealedSecret(ctx, verifierKey); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("a failed open wrote a verifier: %v", err)
	}
}

func TestKeyFormatsAndFileChecks(t *testing.T) {
	raw := bytes.Repeat([]byte{0x5a}, KeySize)
	want, err := NewKey(raw)
	must(t, err)
	for name, form := range map[string][]byte{
		"raw":                raw,
		"hex":                []byte(hex.EncodeToString(raw) + "\n"),
		"HEX":                []byte(strings.ToUpper(hex.EncodeToString(raw))),
		"base64":             []byte(base64.StdEncoding.EncodeToString(raw) + "\n"),
		"base64url unpadded": []byte(base64.RawURLEncoding.EncodeToString(raw)),
	} {
		k, err := ParseKey(form)
		if err != nil || k.ID() != want.ID() {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, bad := range map[string][]byte{
		"short":      []byte("c2VjcmV0LWJ1dC1zaG9ydA=="),
		"text":       []byte("my-password-is-secret-and-long-enough-to-be-a-key-honest\n"),
		"empty":      nil,
		"31 raw":     raw[:31],
		"64 not hex": bytes.Repeat([]byte("z"), 64),
	} {
		_, err := ParseKey(bad)
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if len(bad) > 0 && strings.Contains(err.Error(), string(bad)) {
			t.Errorf("%s: the error quotes the file: %v", name, err)
		}
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	must(t, os.WriteFile(path, GenerateKey(), 0o600))
	if _, err := LoadKeyFile(path); err != nil {
		t.Fatalf("0600 key file: %v", err)
	}
	must(t, os.Chmod(path, 0o644))
	if _, err := LoadKeyFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("0644 key file: %v", err)
	}
	must(t, os.Chmod(path, 0o640))
	if _, err := LoadKeyFile(path); err == nil {
		t.Fatal("0640 key file accepted")
	}
	must(t, os.Chmod(path, 0o400))
	if _, err := LoadKeyFile(path); err != nil {
		t.Fatalf("0400 key file: %v", err)
	}
	if _, err := LoadKeyFile(dir); err == nil {
		t.Fatal("a directory accepted as a key file")
	}
	if os.Geteuid() == 0 { // only root can give a file away
		must(t, os.Chmod(path, 0o600))
		must(t, os.Chown(path, 4242, -1))
		if _, err := LoadKeyFile(path); err == nil || !strings.Contains(err.Error(), "owned by uid 4242") {
			t.Fatalf("key file of another user: %v", err)
		}
	}
}

func TestFindKeyFromSystemdCredential(t *testing.T) {
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	if k, _, err := FindKey(""); k != nil || err != nil {
		t.Fatalf("FindKey with nothing configured = %v, %v", k, err)
	}
	dir := t.TempDir()
	t.Setenv("CREDENTIALS_DIRECTORY", dir)
	if k, _, err := FindKey(""); k != nil || err != nil {
		t.Fatalf("FindKey with an empty credentials dir = %v, %v", k, err)
	}
	gen := GenerateKey()
	must(t, os.WriteFile(filepath.Join(dir, CredentialName), gen, 0o400))
	want, _ := ParseKey(gen)
	k, src, err := FindKey("")
	if err != nil || k.ID() != want.ID() || !strings.Contains(src, "systemd") {
		t.Fatalf("FindKey from the credential = %v, %q, %v", k, src, err)
	}
	// The flag wins over the credential.
	other := filepath.Join(t.TempDir(), "key")
	must(t, os.WriteFile(other, GenerateKey(), 0o600))
	if k, src, _ := FindKey(other); k.ID() == want.ID() || src != other {
		t.Fatalf("FindKey(flag) used the credential")
	}
}

func TestRotateKeepsEveryEntryAndRetiresTheOldKey(t *testing.T) {
	ctx := context.Background()
	store, inst := openStore(t, t.TempDir())
	oldKey, newKey2 := newKey(t), newKey(t)
	s := openSealed(t, store, inst, oldKey)
	entries := map[string]string{
		"account/a/token":         tokenA,
		"account/b/token":         "tok-b",
		"workspace/w1/agent-key":  "agent-key-1",
		"account/c/client_secret": "secret-c",
	}
	for k, v := range entries {
		must(t, s.Set(ctx, k, v))
	}
	if _, err := Rotate(ctx, store, inst, oldKey, oldKey); err == nil {
		t.Fatal("rotation to the same key accepted")
	}
	n, err := Rotate(ctx, store, inst, oldKey, newKey2)
	if err != nil || n != len(entries)+1 {
		t.Fatalf("Rotate = %d, %v; want %d entries (with the verifier)", n, err, len(entries)+1)
	}
	ns := openSealed(t, store, inst, newKey2)
	for k, v := range entries {
		if got, err := ns.Get(ctx, k); err != nil || got != v {
			t.Errorf("after rotation %s = %q, %v", k, got, err)
		}
	}
	if _, err := OpenSealed(ctx, store, inst, oldKey); err == nil || !strings.Contains(err.Error(), "wrong secret key") {
		t.Fatalf("the old key still opens the store: %v", err)
	}
	if _, err := s.Get(ctx, "account/a/token"); err == nil {
		t.Fatal("a store opened with the old key still reads entries")
	}
}

// failingRows fails the rotation at its nth row, after the rows before it
// were rewritten inside the transaction.
type failingRows struct {
	*db.Store
	n int
}

func (f failingRows) ResealSecrets(ctx context.Context, reseal func(key, keyID string, sealed []byte) (string, []byte, error)) (int, error) {
	calls := 0
	return f.Store.ResealSecrets(ctx, func(key, keyID string, sealed []byte) (string, []byte, error) {
		calls++
		if calls == f.n {
			return "", nil, errors.New("injected failure mid-rotation")
		}
		return reseal(key, keyID, sealed)
	})
}

func TestRotateFailureMidwayChangesNothing(t *testing.T) {
	ctx := context.Background()
	store, inst := openStore(t, t.TempDir())
	oldKey, next := newKey(t), newKey(t)
	s := openSealed(t, store, inst, oldKey)
	keys := []string{"account/a/token", "account/b/token", "account/c/token", "account/d/token"}
	for _, k := range keys {
		must(t, s.Set(ctx, k, "value-of-"+k))
	}
	snapshot := func() map[string]string {
		m := map[string]string{}
		for _, k := range append(keys, verifierKey) {
			id, b, err := store.SealedSecret(ctx, k)
			must(t, err)
			m[k] = id + ":" + hex.EncodeToString(b)
		}
		return m
	}
	before := snapshot()
	check := func(what string) {
		t.Helper()
		for k, v := range snapshot() {
			if before[k] != v {
				t.Fatalf("%s: row %s changed", what, k)
			}
		}
		again := openSealed(t, store, inst, oldKey)
		for _, k := range keys {
			if v, err := again.Get(ctx, k); err != nil || v != "value-of-"+k {
				t.Fatalf("%s: %s = %q, %v with the old key", what, k, v, err)
			}
		}
		if _, err := OpenSealed(ctx, store, inst, next); err == nil {
			t.Fatalf("%s: the new key opens the store", what)
		}
	}

	// A failure after two rows were re-sealed in the transaction.
	if _, err := Rotate(ctx, failingRows{store, 3}, inst, oldKey, next); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("Rotate with an injected failure: %v", err)
	}
	check("injected failure")

	// A row that does not open with the old key, in the middle of the
	// order (rows are re-sealed by key): the whole rotation is refused.
	id, b, err := store.SealedSecret(ctx, "account/c/token")
	must(t, err)
	bad := bytes.Clone(b)
	bad[len(bad)-1] ^= 0x80
	must(t, store.PutSealedSecret(ctx, "account/c/token", id, bad))
	before = snapshot()
	if _, err := Rotate(ctx, store, inst, oldKey, next); err == nil || !strings.Contains(err.Error(), "account/c/token") {
		t.Fatalf("Rotate over an altered row: %v", err)
	}
	for k, v := range snapshot() {
		if before[k] != v {
			t.Fatalf("altered row: row %s changed", k)
		}
	}
	if v, err := openSealed(t, store, inst, oldKey).Get(ctx, "account/d/token"); err != nil || v != "value-of-account/d/token" {
		t.Fatalf("after a refused rotation: %q, %v", v, err)
	}

	// A rotation of a data dir that was never sealed is refused.
	empty, emptyInst := openStore(t, t.TempDir())
	if _, err := Rotate(ctx, empty, emptyInst, oldKey, next); err == nil || !strings.Contains(err.Error(), "no sealed secrets") {
		t.Fatalf("Rotate of an unsealed store: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
