package db

import (
	"context"

	"github.com/canvasapp/companion/core"
)

// Sealed secrets are rows of ciphertext that package secrets encrypts and
// decrypts; this file only stores them. A value passed here is already
// sealed: the store never sees plaintext.

// SealedSecret returns the key id and sealed bytes stored under key, or a
// KindNotFound error.
func (s *Store) SealedSecret(ctx context.Context, key string) (string, []byte, error) {
	return sealedSecret(ctx, s, key)
}

// SealedSecret: see Store.SealedSecret.
func (s *PGStore) SealedSecret(ctx context.Context, key string) (string, []byte, error) {
	return sealedSecret(ctx, s, key)
}

func sealedSecret(ctx context.Context, e engine, key string) (keyID string, sealed []byte, err error) {
	err = e.row(ctx, `SELECT key_id, sealed FROM secrets WHERE key = ?`, key).Scan(&keyID, &sealed)
	if isNoRows(err) {
		return "", nil, notFound("secret", key)
	}
	if err != nil {
		return "", nil, e.wrapErr("read secret "+key, err)
	}
	return keyID, sealed, nil
}

// PutSealedSecret stores (or replaces) the sealed bytes of key.
func (s *Store) PutSealedSecret(ctx context.Context, key, keyID string, sealed []byte) error {
	return putSealedSecret(ctx, s, key, keyID, sealed)
}

// PutSealedSecret: see Store.PutSealedSecret.
func (s *PGStore) PutSealedSecret(ctx context.Context, key, keyID string, sealed []byte) error {
	return putSealedSecret(ctx, s, key, keyID, sealed)
}

func putSealedSecret(ctx context.Context, e engine, key, keyID string, sealed []byte) error {
	if key == "" || keyID == "" || len(sealed) == 0 {
		return core.Errorf(core.KindInvalid, "a sealed secret needs a key, a key id and sealed bytes")
	}
	now := e.clock().UnixNano()
	return e.writeTx(ctx, "store secret "+key, func(t tx) error {
		_, err := t.exec(`INSERT INTO secrets (key, key_id, sealed, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed,
				updated_at = excluded.updated_at`, key, keyID, sealed, now)
		return err
	})
}

// DeleteSealedSecret removes key; a missing key is a KindNotFound error.
func (s *Store) DeleteSealedSecret(ctx context.Context, key string) error {
	return deleteSealedSecret(ctx, s, key)
}

// DeleteSealedSecret: see Store.DeleteSealedSecret.
func (s *PGStore) DeleteSealedSecret(ctx context.Context, key string) error {
	return deleteSealedSecret(ctx, s, key)
}

func deleteSealedSecret(ctx context.Context, e engine, key string) error {
	return e.writeTx(ctx, "delete secret "+key, func(t tx) error {
		n, err := t.exec(`DELETE FROM secrets WHERE key = ?`, key)
		if err == nil && n == 0 {
			err = notFound("secret", key)
		}
		return err
	})
}

// CountSealedSecrets returns how many sealed secrets are stored.
func (s *Store) CountSealedSecrets(ctx context.Context) (int, error) {
	return countSealedSecrets(ctx, s)
}

// CountSealedSecrets: see Store.CountSealedSecrets.
func (s *PGStore) CountSealedSecrets(ctx context.Context) (int, error) {
	return countSealedSecrets(ctx, s)
}

func countSealedSecrets(ctx context.Context, e engine) (int, error) {
	var n int
	if err := e.row(ctx, `SELECT count(*) FROM secrets`).Scan(&n); err != nil {
		return 0, e.wrapErr("count secrets", err)
	}
	return n, nil
}

// ResealFunc makes a secret's new key id and sealed bytes from its old ones.
type ResealFunc = func(key, keyID string, sealed []byte) (newKeyID string, newSealed []byte, err error)

// ResealSecrets replaces every sealed secret with what reseal makes of it,
// in one write transaction holding the rows: when reseal (or the
// database) fails for any row, no row changes. It returns how many rows
// were rewritten. reseal runs inside the transaction (on SQLite, while
// the write connection is held), so it must not call the store.
func (s *Store) ResealSecrets(ctx context.Context, reseal ResealFunc) (int, error) {
	return resealSecrets(ctx, s, reseal)
}

// ResealSecrets: see Store.ResealSecrets.
func (s *PGStore) ResealSecrets(ctx context.Context, reseal ResealFunc) (int, error) {
	return resealSecrets(ctx, s, reseal)
}

func resealSecrets(ctx context.Context, e engine, reseal ResealFunc) (int, error) {
	type row struct {
		key, keyID string
		sealed     []byte
	}
	var n int
	now := e.clock().UnixNano()
	err := e.writeTx(ctx, "re-seal secrets", func(t tx) error {
		r, err := t.query(`SELECT key, key_id, sealed FROM secrets ORDER BY key` + t.forUpdate())
		if err != nil {
			return err
		}
		all, err := scanRows(r, func(r scanner) (x row, err error) { return x, r.Scan(&x.key, &x.keyID, &x.sealed) })
		if err != nil {
			return err
		}
		for _, r := range all {
			keyID, sealed, err := reseal(r.key, r.keyID, r.sealed)
			if err != nil {
				return err
			}
			if keyID == "" || len(sealed) == 0 {
				return core.Errorf(core.KindInvalid, "re-sealing secret %s gave no key id or no bytes", r.key)
			}
			if _, err := t.exec(`UPDATE secrets SET key_id = ?, sealed = ?, updated_at = ? WHERE key = ?`,
				keyID, sealed, now, r.key); err != nil {
				return err
			}
		}
		n = len(all)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
