package db

import (
	"context"
	"database/sql"
	"errors"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
	sqlite3 "modernc.org/sqlite/lib"
)

var _ auth.Store = (*Store)(nil)

const (
	userCols = `id, issuer, subject, name, admin, password_hash, created_at`
	// qSessionUser runs on every request signed in by cookie.
	qSessionUser = `SELECT s.user_id, s.method, s.created_at, s.last_seen_at, s.expires_at,
		u.id, u.issuer, u.subject, u.name, u.admin, u.password_hash, u.created_at
		FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id_hash = ?`
	qTokenUser = `SELECT t.id, t.label, t.scope, t.created_at, t.expires_at, t.last_used_at,
		u.id, u.issuer, u.subject, u.name, u.admin, u.password_hash, u.created_at
		FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = ?`
	qUserBySubject = `SELECT ` + userCols + ` FROM users WHERE issuer = ? AND subject = ?`
)

func scanUser(dst *auth.User, admin *int64, created *sql.NullInt64) []any {
	return []any{&dst.ID, &dst.Issuer, &dst.Subject, &dst.Name, admin, &dst.PasswordHash, created}
}

func readUser(r scanner) (auth.User, error) {
	var (
		u       auth.User
		admin   int64
		created sql.NullInt64
	)
	if err := r.Scan(scanUser(&u, &admin, &created)...); err != nil {
		return auth.User{}, err
	}
	u.Admin, u.CreatedAt = admin == 1, timeOf(created)
	return u, nil
}

// CreateUser implements auth.Store.
func (s *Store) CreateUser(ctx context.Context, u auth.User) (auth.User, error) {
	err := s.write(ctx, "create user "+u.Name, func(t txn) error {
		var n int
		if err := t.queryRow(`SELECT count(*) FROM users`).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			u.Admin = true // the first user administers the installation
		}
		_, err := t.exec(`INSERT INTO users (`+userCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			u.ID, u.Issuer, u.Subject, u.Name, boolInt(u.Admin), u.PasswordHash, u.CreatedAt.UnixNano())
		if isCode(err, sqlite3.SQLITE_CONSTRAINT) {
			return core.Errorf(core.KindConflict, "a user %q (%s) already exists", u.Subject, u.Issuer)
		}
		return err
	})
	return u, err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// UserByID implements auth.Store.
func (s *Store) UserByID(ctx context.Context, id string) (auth.User, error) {
	u, err := readUser(s.reads().queryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return auth.User{}, notFound("user", id)
	}
	return u, wrapNil("get user", err)
}

// UserBySubject implements auth.Store.
func (s *Store) UserBySubject(ctx context.Context, issuer, subject string) (auth.User, error) {
	u, err := readUser(s.reads().queryRow(ctx, qUserBySubject, issuer, subject))
	if errors.Is(err, sql.ErrNoRows) {
		return auth.User{}, notFound("user", subject)
	}
	return u, wrapNil("get user", err)
}

// ListUsers implements auth.Store: every user, oldest first.
func (s *Store) ListUsers(ctx context.Context) ([]auth.User, error) {
	rows, err := s.reads().query(ctx, `SELECT `+userCols+` FROM users ORDER BY created_at, id`)
	if err != nil {
		return nil, wrap("list users", err)
	}
	defer rows.Close()
	var out []auth.User
	for rows.Next() {
		u, err := readUser(rows)
		if err != nil {
			return nil, wrap("list users", err)
		}
		out = append(out, u)
	}
	return out, wrapNil("list users", rows.Err())
}

// DeleteUser implements auth.Store; sessions and tokens go with the user
// (foreign keys cascade).
func (s *Store) DeleteUser(ctx context.Context, id string) error {
	return s.write(ctx, "delete user "+id, func(t txn) error {
		return mustAffect(t.exec(`DELETE FROM users WHERE id = ?`, id))(notFound("user", id))
	})
}

// SetPassword implements auth.Store: the new hash and the end of every
// session of the user, in one transaction.
func (s *Store) SetPassword(ctx context.Context, id, hash string) error {
	return s.write(ctx, "set password of "+id, func(t txn) error {
		if err := mustAffect(t.exec(`UPDATE users SET password_hash = ? WHERE id = ?`, hash, id))(notFound("user", id)); err != nil {
			return err
		}
		_, err := t.exec(`DELETE FROM sessions WHERE user_id = ?`, id)
		return err
	})
}

// ListTokens implements auth.Store.
func (s *Store) ListTokens(ctx context.Context, userID string) ([]auth.Token, error) {
	rows, err := s.reads().query(ctx, `SELECT id, label, scope, created_at, expires_at, last_used_at FROM api_tokens WHERE user_id = ? ORDER BY created_at, id`, userID)
	if err != nil {
		return nil, wrap("list tokens", err)
	}
	defer rows.Close()
	out := []auth.Token{}
	for rows.Next() {
		var (
			tk                    auth.Token
			cr, expires, lastUsed sql.NullInt64
		)
		if err := rows.Scan(&tk.ID, &tk.Label, &tk.Scope, &cr, &expires, &lastUsed); err != nil {
			return nil, wrap("list tokens", err)
		}
		tk.UserID, tk.CreatedAt, tk.ExpiresAt, tk.LastUsedAt = userID, timeOf(cr), timeOf(expires), timeOf(lastUsed)
		out = append(out, tk)
	}
	return out, wrapNil("list tokens", rows.Err())
}

// mustAffect turns an exec that changed no row into the error given.
func mustAffect(res sql.Result, err error) func(none error) error {
	return func(none error) error {
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return none
		}
		return nil
	}
}

func wrapNil(what string, err error) error {
	if err == nil {
		return nil
	}
	return wrap(what, err)
}
