package db

import (
	"context"
	"database/sql"

	"github.com/canvasapp/companion/core"
)

// SetAccountFlag records f on an account, replacing any flag it had; nil
// clears the flag. The flag goes when the account does.
func (s *Store) SetAccountFlag(ctx context.Context, accountID string, f *core.AccountFlag) error {
	if f == nil {
		return s.write(ctx, "clear flag of account "+accountID, func(t txn) error {
			_, err := t.exec(`DELETE FROM account_flags WHERE account_id = ?`, accountID)
			return err
		})
	}
	var e enc
	since := e.time("flag since", f.Since)
	if e.err != nil {
		return e.err
	}
	if since == nil {
		return core.Errorf(core.KindInvalid, "flag %s of account %s has no time", f.Code, accountID)
	}
	return s.write(ctx, "flag account "+accountID, func(t txn) error {
		res, err := t.exec(`INSERT INTO account_flags (account_id, code, message, since)
			SELECT id, ?, ?, ? FROM accounts WHERE id = ?
			ON CONFLICT (account_id) DO UPDATE SET code = excluded.code,
				message = excluded.message, since = excluded.since`,
			f.Code, f.Message, since, accountID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return notFound("account", accountID)
		}
		return nil
	})
}

// AccountFlags returns the flag of every flagged account, by account id.
func (s *Store) AccountFlags(ctx context.Context) (map[string]core.AccountFlag, error) {
	rows, err := s.reads().query(ctx, `SELECT account_id, code, message, since FROM account_flags`)
	if err != nil {
		return nil, wrap("list account flags", err)
	}
	defer rows.Close()
	out := map[string]core.AccountFlag{}
	for rows.Next() {
		var (
			id    string
			f     core.AccountFlag
			since sql.NullInt64
		)
		if err := rows.Scan(&id, &f.Code, &f.Message, &since); err != nil {
			return nil, wrap("list account flags", err)
		}
		f.Since = timeOf(since)
		out[id] = f
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list account flags", err)
	}
	return out, nil
}
