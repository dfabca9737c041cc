package db

import (
	"context"
	"database/sql"

	"github.com/canvasapp/companion/core"
)

// SetAccountFlag records f on an account, replacing any flag it had; nil
// clears the flag. The flag goes when the account does.
func (s *Store) SetAccountFlag(ctx context.Context, accountID string, f *core.AccountFlag) error {
	return setAccountFlag(ctx, s, accountID, f)
}

// SetAccountFlag: see Store.SetAccountFlag.
func (s *PGStore) SetAccountFlag(ctx context.Context, accountID string, f *core.AccountFlag) error {
	return setAccountFlag(ctx, s, accountID, f)
}

func setAccountFlag(ctx context.Context, e engine, accountID string, f *core.AccountFlag) error {
	if f == nil {
		return execWrite(ctx, e, "clear flag of account "+accountID, `DELETE FROM account_flags WHERE account_id = ?`, accountID)
	}
	var c enc
	since := c.time("flag since", f.Since)
	if c.err != nil {
		return c.err
	}
	if since == nil {
		return core.Errorf(core.KindInvalid, "flag %s of account %s has no time", f.Code, accountID)
	}
	// The casts type the parameters for PostgreSQL, which cannot infer
	// them in a SELECT list; SQLite takes them as they are.
	return e.writeTx(ctx, "flag account "+accountID, func(t tx) error {
		n, err := t.exec(`INSERT INTO account_flags (account_id, code, message, since)
			SELECT id, CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT) FROM accounts WHERE id = ?
			ON CONFLICT (account_id) DO UPDATE SET code = excluded.code,
				message = excluded.message, since = excluded.since`,
			f.Code, f.Message, since, accountID)
		if err == nil && n == 0 {
			err = notFound("account", accountID)
		}
		return err
	})
}

// AccountFlags returns the flag of every flagged account, by account id.
func (s *Store) AccountFlags(ctx context.Context) (map[string]core.AccountFlag, error) {
	return accountFlags(ctx, s)
}

// AccountFlags: see Store.AccountFlags.
func (s *PGStore) AccountFlags(ctx context.Context) (map[string]core.AccountFlag, error) {
	return accountFlags(ctx, s)
}

func accountFlags(ctx context.Context, e engine) (map[string]core.AccountFlag, error) {
	r, err := e.rowsOf(ctx, `SELECT account_id, code, message, since FROM account_flags`)
	if err != nil {
		return nil, e.wrapErr("list account flags", err)
	}
	out := map[string]core.AccountFlag{}
	_, err = scanRows(r, func(r scanner) (struct{}, error) {
		var (
			id    string
			f     core.AccountFlag
			since sql.NullInt64
		)
		err := r.Scan(&id, &f.Code, &f.Message, &since)
		f.Since = timeOf(since)
		out[id] = f
		return struct{}{}, err
	})
	if err != nil {
		return nil, e.wrapErr("list account flags", err)
	}
	return out, nil
}
