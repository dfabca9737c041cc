package db

import (
	"context"
	"database/sql"
	"errors"

	"github.com/canvasapp/companion/core"
)

// Module pins record, for each installed Wasm provider module, the SHA-256
// of the bytes a person approved and the manifest they were shown, so a
// module whose file changed on disk can be refused at load.

// PutModulePin records (or replaces) the pin of module name.
func (s *Store) PutModulePin(ctx context.Context, name, sha256 string, manifest []byte) error {
	if name == "" || sha256 == "" {
		return core.Errorf(core.KindInvalid, "a module pin needs a name and a hash")
	}
	if manifest == nil {
		manifest = []byte{}
	}
	return s.write(ctx, "pin module "+name, func(t txn) error {
		_, err := t.exec(`INSERT INTO module_pins (name, sha256, manifest, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, manifest = excluded.manifest,
				updated_at = excluded.updated_at`, name, sha256, manifest, s.now().UnixNano())
		return err
	})
}

// ModulePin returns the pinned hash and manifest of module name, or a
// KindNotFound error.
func (s *Store) ModulePin(ctx context.Context, name string) (sha256 string, manifest []byte, err error) {
	err = s.reads().queryRow(ctx, `SELECT sha256, manifest FROM module_pins WHERE name = ?`, name).Scan(&sha256, &manifest)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, notFound("module", name)
	}
	if err != nil {
		return "", nil, wrap("read pin of module "+name, err)
	}
	return sha256, manifest, nil
}

// ListModulePins returns the names of the pinned modules, sorted.
func (s *Store) ListModulePins(ctx context.Context) ([]string, error) {
	rows, err := s.reads().query(ctx, `SELECT name FROM module_pins ORDER BY name`)
	if err != nil {
		return nil, wrap("list module pins", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, wrap("list module pins", err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list module pins", err)
	}
	return names, nil
}

// DeleteModulePin removes the pin of module name; KindNotFound if there is
// none.
func (s *Store) DeleteModulePin(ctx context.Context, name string) error {
	return s.write(ctx, "unpin module "+name, func(t txn) error {
		res, err := t.exec(`DELETE FROM module_pins WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return notFound("module", name)
		}
		return nil
	})
}
