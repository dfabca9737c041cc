package db

import (
	"context"
	"database/sql"
	"errors"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var _ auth.Store = (*PGStore)(nil)

// Users, sessions and tokens live in the database every replica shares,
// so a session started on one replica is valid on all of them.

// pgCode reports whether err is a PostgreSQL error with SQLSTATE code.
func pgCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
)

// CreateUser implements auth.Store. The first user is made an admin; the
// users table is locked for the count so two replicas creating the first
// user at once do not both make an admin.
func (s *PGStore) CreateUser(ctx context.Context, u auth.User) (auth.User, error) {
	err := s.write(ctx, "create user "+u.Name, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			u.Admin = true
		}
		_, err := tx.Exec(ctx, `INSERT INTO users (`+userCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			u.ID, u.Issuer, u.Subject, u.Name, boolInt(u.Admin), u.PasswordHash, u.CreatedAt.UnixNano())
		if pgCode(err, pgUniqueViolation) {
			return core.Errorf(core.KindConflict, "a user %q (%s) already exists", u.Subject, u.Issuer)
		}
		return err
	})
	return u, err
}

// UserByID implements auth.Store.
func (s *PGStore) UserByID(ctx context.Context, id string) (auth.User, error) {
	u, err := readUser(s.pool.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = $1`, id))
	if isNoRows(err) {
		return auth.User{}, notFound("user", id)
	}
	return u, s.wrapNil("get user", err)
}

// UserBySubject implements auth.Store.
func (s *PGStore) UserBySubject(ctx context.Context, issuer, subject string) (auth.User, error) {
	u, err := readUser(s.pool.QueryRow(ctx, pgText(qUserBySubject), issuer, subject))
	if isNoRows(err) {
		return auth.User{}, notFound("user", subject)
	}
	return u, s.wrapNil("get user", err)
}

// ListUsers implements auth.Store: every user, oldest first.
func (s *PGStore) ListUsers(ctx context.Context) ([]auth.User, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+userCols+` FROM users ORDER BY created_at, id COLLATE "C"`)
	if err != nil {
		return nil, s.wrap("list users", err)
	}
	list, err := pgScanAll(rows, readUser)
	return list, s.wrapNil("list users", err)
}

// DeleteUser implements auth.Store; sessions and tokens go with the user.
func (s *PGStore) DeleteUser(ctx context.Context, id string) error {
	return s.execOne(ctx, "delete user "+id, notFound("user", id), `DELETE FROM users WHERE id = $1`, id)
}

// SetPassword implements auth.Store: the new hash and the end of every
// session of the user, in one transaction.
func (s *PGStore) SetPassword(ctx context.Context, id, hash string) error {
	return s.write(ctx, "set password of "+id, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE users SET password_hash = $1 WHERE id = $2`, hash, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return notFound("user", id)
		}
		_, err = tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1`, id)
		return err
	})
}

// ListTokens implements auth.Store.
func (s *PGStore) ListTokens(ctx context.Context, userID string) ([]auth.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, label, scope, created_at, expires_at, last_used_at FROM api_tokens WHERE user_id = $1 ORDER BY created_at, id COLLATE "C"`, userID)
	if err != nil {
		return nil, s.wrap("list tokens", err)
	}
	list, err := pgScanAll(rows, func(r scanner) (auth.Token, error) {
		var (
			tk                    auth.Token
			cr, expires, lastUsed sql.NullInt64
		)
		err := r.Scan(&tk.ID, &tk.Label, &tk.Scope, &cr, &expires, &lastUsed)
		tk.UserID, tk.CreatedAt, tk.ExpiresAt, tk.LastUsedAt = userID, timeOf(cr), timeOf(expires), timeOf(lastUsed)
		return tk, err
	})
	if err != nil {
		return nil, s.wrap("list tokens", err)
	}
	if list == nil {
		list = []auth.Token{}
	}
	return list, nil
}

func (s *PGStore) wrapNil(what string, err error) error {
	if err == nil {
		return nil
	}
	return s.wrap(what, err)
}
