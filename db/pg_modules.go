package db

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/jackc/pgx/v5"

	"github.com/canvasapp/companion/core"
)

// On PostgreSQL an installed module's bytes are kept with its pin
// (migration 0007), so that every serve replica on the database loads the
// modules installed through any of them; on SQLite they stay a file in the
// data dir (docs/decisions.md, "Installed modules on PostgreSQL").

// PutModule records (or replaces) the pin of module name together with
// its bytes, in one write. sha256 must be the hex SHA-256 of module.
func (s *PGStore) PutModule(ctx context.Context, name, sha256Hex string, manifest, module []byte) error {
	if name == "" || sha256Hex == "" || len(module) == 0 {
		return core.Errorf(core.KindInvalid, "a module needs a name, a hash and its bytes")
	}
	if got := hexSHA256(module); got != sha256Hex {
		return core.Errorf(core.KindInvalid, "module %s: its bytes hash to %s, not the pinned %s", name, got, sha256Hex)
	}
	return s.putPin(ctx, "store module "+name, name, sha256Hex, manifest, module)
}

// putPin upserts module name's pin: its hash, its manifest and its bytes
// (nil: none kept). One statement, autocommitted.
func (s *PGStore) putPin(ctx context.Context, what, name, sha256Hex string, manifest, module []byte) error {
	if manifest == nil {
		manifest = []byte{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO module_pins (name, sha256, manifest, updated_at, wasm) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, manifest = excluded.manifest,
			updated_at = excluded.updated_at, wasm = excluded.wasm`, name, sha256Hex, manifest, s.now().UnixNano(), module)
	if err != nil {
		return s.wrap(what, err)
	}
	return nil
}

// ModuleBytes returns the pinned hash of module name and the bytes stored
// with it, read together; module is nil when the pin has none (it was made
// before the bytes were kept here). KindNotFound if there is no pin.
func (s *PGStore) ModuleBytes(ctx context.Context, name string) (sha256Hex string, module []byte, err error) {
	err = s.pool.QueryRow(ctx, `SELECT sha256, wasm FROM module_pins WHERE name = $1`, name).Scan(&sha256Hex, &module)
	if isNoRows(err) {
		return "", nil, notFound("module", name)
	}
	if err != nil {
		return "", nil, s.wrap("read module "+name, err)
	}
	return sha256Hex, module, nil
}

// ModuleHashes returns every pinned module's hash by name, in one cheap
// read (no bytes): what a replica compares its loaded modules with.
func (s *PGStore) ModuleHashes(ctx context.Context) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, sha256 FROM module_pins`)
	if err != nil {
		return nil, s.wrap("list module hashes", err)
	}
	type pin struct{ name, sum string }
	pins, err := pgScanAll(rows, func(r scanner) (p pin, err error) { return p, r.Scan(&p.name, &p.sum) })
	if err != nil {
		return nil, s.wrap("list module hashes", err)
	}
	out := make(map[string]string, len(pins))
	for _, p := range pins {
		out[p.name] = p.sum
	}
	return out, nil
}

// FillModuleBytes stores module as the bytes of module name's pin if the
// pin has none yet and its hash is sha256 (which module must hash to). It
// reports whether it stored them.
func (s *PGStore) FillModuleBytes(ctx context.Context, name, sha256Hex string, module []byte) (bool, error) {
	if got := hexSHA256(module); got != sha256Hex {
		return false, core.Errorf(core.KindInvalid, "module %s: its bytes hash to %s, not %s", name, got, sha256Hex)
	}
	var n int64
	err := s.write(ctx, "fill module "+name, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE module_pins SET wasm = $3 WHERE name = $1 AND sha256 = $2 AND wasm IS NULL`, name, sha256Hex, module)
		n = tag.RowsAffected()
		return err
	})
	return n == 1, err
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
