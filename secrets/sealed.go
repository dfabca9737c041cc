package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/canvasapp/companion/core"
)

// The sealed store is the secret store of a server without an OS keyring:
// each value is encrypted with AES-256-GCM under a key the operator
// supplies (a file, or a systemd credential) and kept as a row of the
// database. The associated data of every value names the database's
// instance id and the entry's key, so a row copied over another (one
// account's token moved to another account) or into another data dir does
// not open. A verifier entry (a known value, sealed like the others) makes
// a wrong key fail at start-up instead of at the first use of an account.

// SealedRows is where a Sealed store keeps its rows (db.Store implements
// it). It stores sealed bytes only; it never sees plaintext.
type SealedRows interface {
	// SealedSecret returns a row, or a core.KindNotFound error.
	SealedSecret(ctx context.Context, key string) (keyID string, sealed []byte, err error)
	PutSealedSecret(ctx context.Context, key, keyID string, sealed []byte) error
	// DeleteSealedSecret removes a row; a missing one is core.KindNotFound.
	DeleteSealedSecret(ctx context.Context, key string) error
	CountSealedSecrets(ctx context.Context) (int, error)
	// ResealSecrets rewrites every row in one transaction: all or none.
	ResealSecrets(ctx context.Context, reseal func(key, keyID string, sealed []byte) (string, []byte, error)) (int, error)
}

// verifierKey is the entry that proves a key is the right one. It cannot
// collide with core's keys ("account/…", "workspace/…").
const verifierKey = "companion/sealed-verifier"

const verifierValue = "companion sealed store verifier v1"

// KeySize is the size of a secret key in bytes.
const KeySize = 32

// Key is a secret key of the sealed store. It holds the AEAD derived from
// the key's bytes, never the bytes themselves, and is safe for concurrent
// use.
type Key struct {
	id   string
	aead cipher.AEAD
}

// NewKey makes a Key of 32 secret bytes. The encryption key and the key's
// id are derived from them with HKDF-SHA256 under separate labels, so the
// id (stored beside each row, and logged) says nothing about the
// encryption key.
func NewKey(raw []byte) (*Key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("a secret key is %d bytes, not %d", KeySize, len(raw))
	}
	enc, err := hkdf.Key(sha256.New, raw, nil, "companion sealed secrets v1: AES-256-GCM key", 32)
	if err != nil {
		return nil, err
	}
	id, err := hkdf.Key(sha256.New, raw, nil, "companion sealed secrets v1: key id", 8)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(enc)
	if err != nil {
		return nil, err
	}
	// A fresh random 96-bit nonce per value, prepended to it. A key may
	// seal 2^32 values before a nonce collision becomes a risk; companion
	// seals one per account credential and workspace, and a rotation
	// starts a new key.
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, err
	}
	return &Key{id: hex.EncodeToString(id), aead: aead}, nil
}

// ID names the key (16 hex digits); it is stored with each row it seals.
func (k *Key) ID() string { return k.id }

// associatedData binds a sealed value to its database and its key.
func associatedData(instance, key string) []byte {
	return []byte("companion sealed v1\x00" + instance + "\x00" + key)
}

func (k *Key) seal(instance, key string, value []byte) []byte {
	return k.aead.Seal(nil, nil, value, associatedData(instance, key))
}

func (k *Key) open(instance, key string, sealed []byte) ([]byte, error) {
	return k.aead.Open(nil, nil, sealed, associatedData(instance, key))
}

// Sealed is a core.Secrets that keeps values encrypted in SealedRows. Make
// one with OpenSealed.
type Sealed struct {
	rows     SealedRows
	instance string
	key      *Key
}

var _ core.Secrets = (*Sealed)(nil)

// OpenSealed opens the sealed store of the database whose instance id is
// instance. A store without entries gets a verifier sealed with key; a
// store that has one must open it with key, or OpenSealed fails saying
// which key the entries need. Nothing is written when it fails.
func OpenSealed(ctx context.Context, rows SealedRows, instance string, key *Key) (*Sealed, error) {
	if instance == "" || key == nil {
		return nil, fmt.Errorf("secrets: a sealed store needs an instance id and a key")
	}
	s := &Sealed{rows: rows, instance: instance, key: key}
	keyID, sealed, err := rows.SealedSecret(ctx, verifierKey)
	switch {
	case core.IsKind(err, core.KindNotFound):
		n, err := rows.CountSealedSecrets(ctx)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			return nil, fmt.Errorf("the sealed secret store has %d entries but no verifier entry, so no key can be checked against it; the database was edited: restore it from a backup", n)
		}
		if err := rows.PutSealedSecret(ctx, verifierKey, key.id, key.seal(instance, verifierKey, []byte(verifierValue))); err != nil {
			return nil, fmt.Errorf("create the sealed store's verifier: %w", err)
		}
		return s, nil
	case err != nil:
		return nil, err
	}
	if keyID != key.id {
		return nil, fmt.Errorf("wrong secret key: this data dir's secrets are sealed with key id %s, and the key given has id %s; start with the key file they were sealed with (after a rotate-key, the new one)", keyID, key.id)
	}
	if v, err := key.open(instance, verifierKey, sealed); err != nil || string(v) != verifierValue {
		return nil, fmt.Errorf("the sealed store's verifier does not open with the secret key (id %s): the database was altered or copied from another data dir; restore it from a backup", key.id)
	}
	return s, nil
}

// KeyID is the id of the key the store seals with.
func (s *Sealed) KeyID() string { return s.key.id }

// Set seals value under key, replacing any previous value.
func (s *Sealed) Set(ctx context.Context, key, value string) error {
	if key == verifierKey {
		return core.Errorf(core.KindInvalid, "secret key %s is reserved", key)
	}
	return s.rows.PutSealedSecret(ctx, key, s.key.id, s.key.seal(s.instance, key, []byte(value)))
}

// Get opens the value stored under key. A missing key is a
// core.KindNotFound error; a value that does not open (altered, moved
// from another entry, sealed with another key) is a core.KindInternal
// error that says so.
func (s *Sealed) Get(ctx context.Context, key string) (string, error) {
	keyID, sealed, err := s.rows.SealedSecret(ctx, key)
	if err != nil {
		return "", err
	}
	if keyID != s.key.id {
		return "", core.Errorf(core.KindInternal, "secret %s is sealed with key id %s, not the current key %s; run companion secrets rotate-key from that key, or add the account again", key, keyID, s.key.id)
	}
	v, err := s.key.open(s.instance, key, sealed)
	if err != nil {
		return "", core.Errorf(core.KindInternal, "secret %s does not open: its row was altered or copied from another entry; remove the account and add it again", key)
	}
	return string(v), nil
}

// Delete removes key; a missing key is a core.KindNotFound error.
func (s *Sealed) Delete(ctx context.Context, key string) error {
	if key == verifierKey {
		return core.Errorf(core.KindInvalid, "secret key %s is reserved", key)
	}
	return s.rows.DeleteSealedSecret(ctx, key)
}

// IsSealed reports whether the database holds sealed secrets: such a data
// dir needs its key, whatever the keyring says.
func IsSealed(ctx context.Context, rows SealedRows) (bool, error) {
	n, err := rows.CountSealedSecrets(ctx)
	return n > 0, err
}

// Rotate re-seals every entry of the store with newKey, in one
// transaction: if any entry does not open with oldKey (or anything else
// fails), nothing changes and oldKey still opens everything. Afterwards
// only newKey opens the store. It returns how many entries it re-sealed,
// the verifier included.
func Rotate(ctx context.Context, rows SealedRows, instance string, oldKey, newKey *Key) (int, error) {
	if oldKey.id == newKey.id {
		return 0, fmt.Errorf("the new key is the old key (id %s); make a new one with companion secrets gen-key", oldKey.id)
	}
	sealed, err := IsSealed(ctx, rows)
	if err != nil {
		return 0, err
	}
	if !sealed {
		return 0, fmt.Errorf("this data dir has no sealed secrets to re-encrypt (it has not been run with --secrets sealed)")
	}
	if _, err := OpenSealed(ctx, rows, instance, oldKey); err != nil {
		return 0, err
	}
	n, err := rows.ResealSecrets(ctx, func(key, keyID string, sealed []byte) (string, []byte, error) {
		if keyID != oldKey.id {
			return "", nil, fmt.Errorf("secret %s is sealed with key id %s, not the old key %s; nothing was changed", key, keyID, oldKey.id)
		}
		v, err := oldKey.open(instance, key, sealed)
		if err != nil {
			return "", nil, fmt.Errorf("secret %s does not open with the old key (its row was altered); nothing was changed: remove that account, then rotate again", key)
		}
		return newKey.id, newKey.seal(instance, key, v), nil
	})
	if err != nil {
		return 0, fmt.Errorf("rotate the secret key: %w", err)
	}
	return n, nil
}
