package db

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var _ auth.Store = (*PGStore)(nil)

// Users, sessions and tokens live in the database every replica shares,
// so a session started on one replica is valid on all of them.
var (
	pgSessionUser   = pgSQL(qSessionUser)
	pgTokenUser     = pgSQL(qTokenUser)
	pgUserBySubject = pgSQL(qUserBySubject)
)

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
	u, err := readUser(s.pool.QueryRow(ctx, pgUserBySubject, issuer, subject))
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

// PutSession implements auth.Store.
func (s *PGStore) PutSession(ctx context.Context, ss auth.Session) error {
	return s.write(ctx, "start session", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO sessions (id_hash, user_id, method, created_at, last_seen_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			ss.IDHash, ss.UserID, ss.Method, ss.CreatedAt.UnixNano(), ss.LastSeenAt.UnixNano(), nanos(ss.ExpiresAt))
		if pgCode(err, pgForeignKeyViolation) || pgCode(err, pgUniqueViolation) {
			return notFound("user", ss.UserID)
		}
		return err
	})
}

// SessionUser implements auth.Store.
func (s *PGStore) SessionUser(ctx context.Context, idHash string) (auth.Session, auth.User, error) {
	var (
		ss                        auth.Session
		u                         auth.User
		admin                     int64
		created, cr, seen, expiry sql.NullInt64
	)
	dst := append([]any{&ss.UserID, &ss.Method, &cr, &seen, &expiry}, scanUser(&u, &admin, &created)...)
	err := s.pool.QueryRow(ctx, pgSessionUser, idHash).Scan(dst...)
	if isNoRows(err) {
		return ss, u, notFound("session", "")
	}
	if err != nil {
		return ss, u, s.wrap("get session", err)
	}
	ss.IDHash, ss.CreatedAt, ss.LastSeenAt, ss.ExpiresAt = idHash, timeOf(cr), timeOf(seen), timeOf(expiry)
	u.Admin, u.CreatedAt = admin == 1, timeOf(created)
	return ss, u, nil
}

// TouchSession implements auth.Store.
func (s *PGStore) TouchSession(ctx context.Context, idHash string, at time.Time) error {
	return s.write(ctx, "touch session", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE sessions SET last_seen_at = $1 WHERE id_hash = $2`, at.UnixNano(), idHash)
		return err
	})
}

// DeleteSession implements auth.Store; an unknown session is no error.
func (s *PGStore) DeleteSession(ctx context.Context, idHash string) error {
	return s.write(ctx, "end session", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM sessions WHERE id_hash = $1`, idHash)
		return err
	})
}

// DeleteExpiredSessions implements auth.Store.
func (s *PGStore) DeleteExpiredSessions(ctx context.Context, now, idleBefore time.Time) (int, error) {
	var n int64
	err := s.write(ctx, "prune sessions", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM sessions WHERE expires_at <= $1 OR last_seen_at < $2`, nanos(now), nanos(idleBefore))
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}

// PutToken implements auth.Store.
func (s *PGStore) PutToken(ctx context.Context, tk auth.Token) error {
	var e enc
	args := []any{tk.ID, tk.Hash, tk.UserID, tk.Label, tk.CreatedAt.UnixNano(), e.time("expires_at", tk.ExpiresAt)}
	if e.err != nil {
		return e.err
	}
	return s.write(ctx, "create token", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO api_tokens (id, token_hash, user_id, label, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`, args...)
		if pgCode(err, pgForeignKeyViolation) || pgCode(err, pgUniqueViolation) {
			return notFound("user", tk.UserID)
		}
		return err
	})
}

// TokenUser implements auth.Store.
func (s *PGStore) TokenUser(ctx context.Context, hash string) (auth.Token, auth.User, error) {
	var (
		tk                             auth.Token
		u                              auth.User
		admin                          int64
		created, cr, expires, lastUsed sql.NullInt64
	)
	dst := append([]any{&tk.ID, &tk.Label, &cr, &expires, &lastUsed}, scanUser(&u, &admin, &created)...)
	err := s.pool.QueryRow(ctx, pgTokenUser, hash).Scan(dst...)
	if isNoRows(err) {
		return tk, u, notFound("token", "")
	}
	if err != nil {
		return tk, u, s.wrap("get token", err)
	}
	tk.Hash, tk.UserID, tk.CreatedAt, tk.ExpiresAt, tk.LastUsedAt = hash, u.ID, timeOf(cr), timeOf(expires), timeOf(lastUsed)
	u.Admin, u.CreatedAt = admin == 1, timeOf(created)
	return tk, u, nil
}

// TouchToken implements auth.Store.
func (s *PGStore) TouchToken(ctx context.Context, id string, at time.Time) error {
	return s.write(ctx, "touch token", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE api_tokens SET last_used_at = $1 WHERE id = $2`, at.UnixNano(), id)
		return err
	})
}

// ListTokens implements auth.Store.
func (s *PGStore) ListTokens(ctx context.Context, userID string) ([]auth.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, label, created_at, expires_at, last_used_at FROM api_tokens WHERE user_id = $1 ORDER BY created_at, id COLLATE "C"`, userID)
	if err != nil {
		return nil, s.wrap("list tokens", err)
	}
	list, err := pgScanAll(rows, func(r scanner) (auth.Token, error) {
		var (
			tk                    auth.Token
			cr, expires, lastUsed sql.NullInt64
		)
		err := r.Scan(&tk.ID, &tk.Label, &cr, &expires, &lastUsed)
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

// DeleteToken implements auth.Store.
func (s *PGStore) DeleteToken(ctx context.Context, userID, id string) error {
	return s.execOne(ctx, "revoke token "+id, notFound("token", id), `DELETE FROM api_tokens WHERE id = $1 AND user_id = $2`, id, userID)
}

func (s *PGStore) wrapNil(what string, err error) error {
	if err == nil {
		return nil
	}
	return s.wrap(what, err)
}
