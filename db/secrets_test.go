package db_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/canvasapp/companion/core"
)

func TestSealedSecretRows(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)

	if _, _, err := s.SealedSecret(ctx, "account/a/token"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("SealedSecret of a missing key: %v, want not_found", err)
	}
	if err := s.DeleteSealedSecret(ctx, "account/a/token"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("DeleteSealedSecret of a missing key: %v, want not_found", err)
	}
	if err := s.PutSealedSecret(ctx, "account/a/token", "", []byte{1}); !core.IsKind(err, core.KindInvalid) {
		t.Fatalf("PutSealedSecret without a key id: %v, want invalid", err)
	}
	for _, k := range []string{"account/a/token", "account/b/token"} {
		if err := s.PutSealedSecret(ctx, k, "k1", []byte("sealed-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutSealedSecret(ctx, "account/a/token", "k1", []byte("sealed-again")); err != nil { // replace
		t.Fatal(err)
	}
	s.Close()
	s = openAt(t, path)
	defer s.Close()
	id, b, err := s.SealedSecret(ctx, "account/a/token")
	if err != nil || id != "k1" || !bytes.Equal(b, []byte("sealed-again")) {
		t.Fatalf("SealedSecret = %q, %q, %v", id, b, err)
	}
	if n, err := s.CountSealedSecrets(ctx); err != nil || n != 2 {
		t.Fatalf("CountSealedSecrets = %d, %v; want 2", n, err)
	}

	// A reseal that fails on its second row changes no row.
	calls := 0
	_, err = s.ResealSecrets(ctx, func(key, keyID string, sealed []byte) (string, []byte, error) {
		calls++
		if calls == 2 {
			return "", nil, errors.New("boom")
		}
		return "k2", []byte("new"), nil
	})
	if err == nil || calls != 2 {
		t.Fatalf("ResealSecrets with a failing row: %v after %d calls", err, calls)
	}
	if id, b, _ := s.SealedSecret(ctx, "account/a/token"); id != "k1" || string(b) != "sealed-again" {
		t.Fatalf("a failed reseal changed a row: %q %q", id, b)
	}
	n, err := s.ResealSecrets(ctx, func(key, keyID string, sealed []byte) (string, []byte, error) {
		return "k2", append([]byte("re-"), sealed...), nil
	})
	if err != nil || n != 2 {
		t.Fatalf("ResealSecrets = %d, %v", n, err)
	}
	if id, b, _ := s.SealedSecret(ctx, "account/b/token"); id != "k2" || string(b) != "re-sealed-account/b/token" {
		t.Fatalf("after reseal: %q %q", id, b)
	}
	if err := s.DeleteSealedSecret(ctx, "account/b/token"); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.CountSealedSecrets(ctx); n != 1 {
		t.Fatalf("%d rows after delete, want 1", n)
	}
}
