package db

import (
	"context"
	"database/sql"
	"errors"
	"time"

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
	qTokenUser = `SELECT t.id, t.label, t.created_at, t.expires_at, t.last_used_at,
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

// PutSession implements auth.Store.
func (s *Store) PutSession(ctx context.Context, ss auth.Session) error {
	return s.write(ctx, "start session", func(t txn) error {
		_, err := t.exec(`INSERT INTO sessions (id_hash, user_id, method, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
			ss.IDHash, ss.UserID, ss.Method, ss.CreatedAt.UnixNano(), ss.LastSeenAt.UnixNano(), nanos(ss.ExpiresAt))
		if isCode(err, sqlite3.SQLITE_CONSTRAINT) {
			return notFound("user", ss.UserID)
		}
		return err
	})
}

// SessionUser implements auth.Store.
func (s *Store) SessionUser(ctx context.Context, idHash string) (auth.Session, auth.User, error) {
	var (
		ss               auth.Session
		cr, seen, expiry sql.NullInt64
	)
	u, err := s.credentialUser(ctx, qSessionUser, idHash, "session", &ss.UserID, &ss.Method, &cr, &seen, &expiry)
	if err != nil {
		return ss, u, err
	}
	ss.IDHash, ss.CreatedAt, ss.LastSeenAt, ss.ExpiresAt = idHash, timeOf(cr), timeOf(seen), timeOf(expiry)
	return ss, u, nil
}

// credentialUser reads the one row query q finds for key: the
// credential's own columns into own, then the user's (see scanUser). what
// names the credential ("session", "token") in errors; no row is a
// not-found error.
func (s *Store) credentialUser(ctx context.Context, q, key, what string, own ...any) (auth.User, error) {
	var (
		u       auth.User
		admin   int64
		created sql.NullInt64
	)
	err := s.reads().queryRow(ctx, q, key).Scan(append(own, scanUser(&u, &admin, &created)...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return u, notFound(what, "")
	}
	if err != nil {
		return u, wrap("get "+what, err)
	}
	u.Admin, u.CreatedAt = admin == 1, timeOf(created)
	return u, nil
}

// TouchSession implements auth.Store.
func (s *Store) TouchSession(ctx context.Context, idHash string, at time.Time) error {
	return s.write(ctx, "touch session", func(t txn) error {
		_, err := t.exec(`UPDATE sessions SET last_seen_at = ? WHERE id_hash = ?`, at.UnixNano(), idHash)
		return err
	})
}

// DeleteSession implements auth.Store; an unknown session is no error.
func (s *Store) DeleteSession(ctx context.Context, idHash string) error {
	return s.write(ctx, "end session", func(t txn) error {
		_, err := t.exec(`DELETE FROM sessions WHERE id_hash = ?`, idHash)
		return err
	})
}

// DeleteExpiredSessions implements auth.Store.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now, idleBefore time.Time) (int, error) {
	var n int64
	err := s.write(ctx, "prune sessions", func(t txn) error {
		res, err := t.exec(`DELETE FROM sessions WHERE expires_at <= ? OR last_seen_at < ?`, nanos(now), nanos(idleBefore))
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	return int(n), err
}

// PutToken implements auth.Store.
func (s *Store) PutToken(ctx context.Context, tk auth.Token) error {
	var e enc
	args := []any{tk.ID, tk.Hash, tk.UserID, tk.Label, tk.CreatedAt.UnixNano(), e.time("expires_at", tk.ExpiresAt)}
	if e.err != nil {
		return e.err
	}
	return s.write(ctx, "create token", func(t txn) error {
		_, err := t.exec(`INSERT INTO api_tokens (id, token_hash, user_id, label, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`, args...)
		if isCode(err, sqlite3.SQLITE_CONSTRAINT) {
			return notFound("user", tk.UserID)
		}
		return err
	})
}

// TokenUser implements auth.Store.
func (s *Store) TokenUser(ctx context.Context, hash string) (auth.Token, auth.User, error) {
	var (
		tk                    auth.Token
		cr, expires, lastUsed sql.NullInt64
	)
	u, err := s.credentialUser(ctx, qTokenUser, hash, "token", &tk.ID, &tk.Label, &cr, &expires, &lastUsed)
	if err != nil {
		return tk, u, err
	}
	tk.Hash, tk.UserID, tk.CreatedAt, tk.ExpiresAt, tk.LastUsedAt = hash, u.ID, timeOf(cr), timeOf(expires), timeOf(lastUsed)
	return tk, u, nil
}

// TouchToken implements auth.Store.
func (s *Store) TouchToken(ctx context.Context, id string, at time.Time) error {
	return s.write(ctx, "touch token", func(t txn) error {
		_, err := t.exec(`UPDATE api_tokens SET last_used_at = ? WHERE id = ?`, at.UnixNano(), id)
		return err
	})
}

// ListTokens implements auth.Store.
func (s *Store) ListTokens(ctx context.Context, userID string) ([]auth.Token, error) {
	rows, err := s.reads().query(ctx, `SELECT id, label, created_at, expires_at, last_used_at FROM api_tokens WHERE user_id = ? ORDER BY created_at, id`, userID)
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
		if err := rows.Scan(&tk.ID, &tk.Label, &cr, &expires, &lastUsed); err != nil {
			return nil, wrap("list tokens", err)
		}
		tk.UserID, tk.CreatedAt, tk.ExpiresAt, tk.LastUsedAt = userID, timeOf(cr), timeOf(expires), timeOf(lastUsed)
		out = append(out, tk)
	}
	return out, wrapNil("list tokens", rows.Err())
}

// DeleteToken implements auth.Store.
func (s *Store) DeleteToken(ctx context.Context, userID, id string) error {
	return s.write(ctx, "revoke token "+id, func(t txn) error {
		return mustAffect(t.exec(`DELETE FROM api_tokens WHERE id = ? AND user_id = ?`, id, userID))(notFound("token", id))
	})
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
