package db

import (
	"context"
	"database/sql"
	"errors"

	"github.com/canvasapp/companion/core"
)

// Sealed secrets are rows of ciphertext that package secrets encrypts and
// decrypts; this file only stores them. A value passed here is already
// sealed: the store never sees plaintext.

// SealedSecret returns the key id and sealed bytes stored under key, or a
// KindNotFound error.
func (s *Store) SealedSecret(ctx context.Context, key string) (keyID string, sealed []byte, err error) {
	err = s.reads().queryRow(ctx, `SELECT key_id, sealed FROM secrets WHERE key = ?`, key).Scan(&keyID, &sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, notFound("secret", key)
	}
	if err != nil {
		return "", nil, wrap("read secret "+key, err)
	}
	return keyID, sealed, nil
}

// PutSealedSecret stores (or replaces) the sealed bytes of key.
func (s *Store) PutSealedSecret(ctx context.Context, key, keyID string, sealed []byte) error {
	if key == "" || keyID == "" || len(sealed) == 0 {
		return core.Errorf(core.KindInvalid, "a sealed secret needs a key, a key id and sealed bytes")
	}
	return s.write(ctx, "store secret "+key, func(t txn) error {
		_, err := t.exec(`INSERT INTO secrets (key, key_id, sealed, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed,
				updated_at = excluded.updated_at`, key, keyID, sealed, s.now().UnixNano())
		return err
	})
}

// DeleteSealedSecret removes key; a missing key is a KindNotFound error.
func (s *Store) DeleteSealedSecret(ctx context.Context, key string) error {
	return s.write(ctx, "delete secret "+key, func(t txn) error {
		res, err := t.exec(`DELETE FROM secrets WHERE key = ?`, key)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return notFound("secret", key)
		}
		return nil
	})
}

// CountSealedSecrets returns how many sealed secrets are stored.
func (s *Store) CountSealedSecrets(ctx context.Context) (int, error) {
	var n int
	if err := s.reads().queryRow(ctx, `SELECT count(*) FROM secrets`).Scan(&n); err != nil {
		return 0, wrap("count secrets", err)
	}
	return n, nil
}

// ResealSecrets replaces every sealed secret with what reseal makes of it,
// in one write transaction: when reseal (or the database) fails for any
// row, no row changes. It returns how many rows were rewritten. reseal
// runs while the write connection is held, so it must not call the store.
func (s *Store) ResealSecrets(ctx context.Context, reseal func(key, keyID string, sealed []byte) (newKeyID string, newSealed []byte, err error)) (int, error) {
	type row struct {
		key, keyID string
		sealed     []byte
	}
	var n int
	err := s.write(ctx, "re-seal secrets", func(t txn) error {
		rows, err := t.query(`SELECT key, key_id, sealed FROM secrets ORDER BY key`)
		if err != nil {
			return err
		}
		var all []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.key, &r.keyID, &r.sealed); err != nil {
				rows.Close()
				return err
			}
			all = append(all, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		now := s.now().UnixNano()
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
