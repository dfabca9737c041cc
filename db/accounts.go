package db

import (
	"context"
	"database/sql"
	"errors"

	"github.com/canvasapp/companion/core"
)

const (
	accountCols = `id, owner, provider, label, config, credentials, created_at, shared, delete_export`
	qGetAccount = `SELECT ` + accountCols + ` FROM accounts WHERE id = ?`
	qPutAccount = `INSERT INTO accounts (` + accountCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, provider = excluded.provider,
				label = excluded.label, config = excluded.config,
				credentials = excluded.credentials, created_at = excluded.created_at, shared = excluded.shared,
				delete_export = excluded.delete_export`
)

// PutAccount inserts or replaces an account. Credentials holds the names
// of its secrets only; the values live in the secret store. A name that
// does not look like one (1 to 64 letters, digits, '_', '-', '.') is
// refused, so a token passed by mistake is not written to disk.
func (s *Store) PutAccount(ctx context.Context, a core.Account) error {
	args, err := accountArgs(a)
	if err != nil {
		return err
	}
	return s.write(ctx, "put account "+a.ID, func(t txn) error {
		_, err := t.exec(qPutAccount, args...)
		return err
	})
}

// accountArgs checks a and returns its columns in accountCols order.
func accountArgs(a core.Account) ([]any, error) {
	if a.ID == "" {
		return nil, core.Errorf(core.KindInvalid, "an account needs an id")
	}
	for _, name := range a.Credentials {
		if !credentialName(name) {
			return nil, core.Errorf(core.KindInvalid, "account %s: credential names are 1-64 letters, digits, '_', '-' or '.'", a.ID)
		}
	}
	var e enc
	args := []any{a.ID, a.Owner, a.Provider, a.Label,
		e.json("config", a.Config, a.Config == nil), e.json("credentials", a.Credentials, a.Credentials == nil),
		e.time("created_at", a.CreatedAt), boolInt(a.Shared), string(a.DeleteExport.Effective())}
	return args, e.err
}

func credentialName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

// GetAccount returns the account with id.
func (s *Store) GetAccount(ctx context.Context, id string) (core.Account, error) {
	a, err := scanAccount(s.reads().queryRow(ctx, qGetAccount, id))
	if errors.Is(err, sql.ErrNoRows) {
		return core.Account{}, notFound("account", id)
	}
	if err != nil {
		return core.Account{}, wrap("get account "+id, err)
	}
	return a, nil
}

// ListAccounts returns every account of every owner, oldest first.
func (s *Store) ListAccounts(ctx context.Context) ([]core.Account, error) {
	rows, err := s.reads().query(ctx, `SELECT `+accountCols+` FROM accounts ORDER BY created_at, id`)
	if err != nil {
		return nil, wrap("list accounts", err)
	}
	defer rows.Close()
	var list []core.Account
	for rows.Next() {
		a, err := scanAccount(rows)
		if err != nil {
			return nil, wrap("list accounts", err)
		}
		list = append(list, a)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list accounts", err)
	}
	return list, nil
}

// DeleteAccount forgets an account. Its workspaces are left as they are
// (core turns them into tombstones first).
func (s *Store) DeleteAccount(ctx context.Context, id string) error {
	return s.write(ctx, "delete account "+id, func(t txn) error {
		res, err := t.exec(`DELETE FROM accounts WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return notFound("account", id)
		}
		return nil
	})
}

func scanAccount(r scanner) (core.Account, error) {
	var (
		a           core.Account
		config, crd sql.NullString
		created     sql.NullInt64
		shared      int64
		delExport   string
	)
	if err := r.Scan(&a.ID, &a.Owner, &a.Provider, &a.Label, &config, &crd, &created, &shared, &delExport); err != nil {
		return core.Account{}, err
	}
	var err error
	if a.Config, err = mapOf("config of account", a.ID, config); err != nil {
		return core.Account{}, err
	}
	if a.Credentials, err = listOf("credentials of account", a.ID, crd); err != nil {
		return core.Account{}, err
	}
	a.CreatedAt, a.Shared = timeOf(created), shared == 1
	if m := core.DeleteExportMode(delExport); m != core.DeleteExportRequired {
		a.DeleteExport = m // the zero value is required
	}
	return a, nil
}
