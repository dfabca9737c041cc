package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/secrets"
)

// TestSecretStoreChoice covers the choices that need no keyring probe;
// the probing ones run through the binary (e2e/secrets_test.go).
func TestSecretStoreChoice(t *testing.T) {
	ctx := context.Background()
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	dir := t.TempDir()
	store, err := db.Open(ctx, filepath.Join(dir, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, secrets.GenerateKey(), 0o600); err != nil {
		t.Fatal(err)
	}

	got, err := openSecretStore(ctx, useDesktop, secretFlags{}, store, log)
	if _, ok := got.(*secrets.Keyring); err != nil || !ok {
		t.Fatalf("desktop default = %T, %v; want the keyring", got, err)
	}
	if _, err := openSecretStore(ctx, useServer, secretFlags{backend: "sealed"}, store, log); err == nil || !strings.Contains(err.Error(), "gen-key") {
		t.Fatalf("sealed without a key: %v", err)
	}
	if _, err := openSecretStore(ctx, useServer, secretFlags{backend: "keyring", keyFile: key}, store, log); err == nil {
		t.Fatal("--secrets keyring with a key file accepted")
	}
	// A configured key means sealed, on the desktop too.
	got, err = openSecretStore(ctx, useDesktop, secretFlags{keyFile: key}, store, log)
	if _, ok := got.(*secrets.Sealed); err != nil || !ok {
		t.Fatalf("desktop with a key = %T, %v; want sealed", got, err)
	}
	if err := got.Set(ctx, core.CredentialKey("acc_1", "token"), "tok"); err != nil {
		t.Fatal(err)
	}
	// Once sealed, the data dir is never taken to the keyring.
	for _, sf := range []secretFlags{{}, {backend: "keyring"}} {
		if _, err := openSecretStore(ctx, useDesktop, sf, store, log); err == nil || !strings.Contains(err.Error(), "sealed") {
			t.Fatalf("%+v on a sealed data dir: %v", sf, err)
		}
	}
	if err := (&secretFlags{backend: "plain"}).check(); err == nil {
		t.Fatal("--secrets plain accepted")
	}
}

func TestReadCredentials(t *testing.T) {
	one := core.ProviderInfo{Name: "daytona", Credentials: []core.CredentialSpec{{Name: "token"}}}
	two := core.ProviderInfo{Name: "acme", Credentials: []core.CredentialSpec{{Name: "key"}, {Name: "secret"}}}
	c, err := readCredentials(strings.NewReader("  tok-1\n"), one, io.Discard)
	if err != nil || c["token"] != "tok-1" {
		t.Fatalf("one credential = %v, %v", c, err)
	}
	if _, err := readCredentials(strings.NewReader("\n"), one, io.Discard); err == nil || !strings.Contains(err.Error(), "stdin") {
		t.Fatalf("empty stdin: %v", err)
	}
	c, err = readCredentials(strings.NewReader("key=k1\n\nsecret = s=2\n"), two, io.Discard)
	if err != nil || c["key"] != "k1" || c["secret"] != "s=2" {
		t.Fatalf("two credentials = %v, %v", c, err)
	}
	if _, err := readCredentials(strings.NewReader("just-a-token"), two, io.Discard); err == nil || strings.Contains(err.Error(), "just-a-token") {
		t.Fatalf("a bare token for two credentials: %v", err)
	}
	if c, err := readCredentials(strings.NewReader("ignored"), core.ProviderInfo{}, io.Discard); err != nil || c != nil {
		t.Fatalf("no credentials = %v, %v", c, err)
	}
}
