package db

import (
	"context"
	"database/sql"
	"time"

	"github.com/canvasapp/companion/auth"
	sqlite3 "modernc.org/sqlite/lib"
)

// Sessions and API tokens, written once for both engines: on PostgreSQL
// they live in the database every replica shares, so a session started on
// one replica is valid on all of them and ending it anywhere ends it
// everywhere.

// refusedByConstraint reports whether err is a constraint violation (an
// unknown user id, on either engine).
func refusedByConstraint(err error) bool {
	return isCode(err, sqlite3.SQLITE_CONSTRAINT) || pgCode(err, pgForeignKeyViolation) || pgCode(err, pgUniqueViolation)
}

// PutSession implements auth.Store.
func (s *Store) PutSession(ctx context.Context, ss auth.Session) error { return putSession(ctx, s, ss) }

// PutSession implements auth.Store.
func (s *PGStore) PutSession(ctx context.Context, ss auth.Session) error {
	return putSession(ctx, s, ss)
}

func putSession(ctx context.Context, e engine, ss auth.Session) error {
	return e.writeTx(ctx, "start session", func(t tx) error {
		_, err := t.exec(`INSERT INTO sessions (id_hash, user_id, method, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
			ss.IDHash, ss.UserID, ss.Method, ss.CreatedAt.UnixNano(), ss.LastSeenAt.UnixNano(), nanos(ss.ExpiresAt))
		if refusedByConstraint(err) {
			return notFound("user", ss.UserID)
		}
		return err
	})
}

// SessionUser implements auth.Store.
func (s *Store) SessionUser(ctx context.Context, idHash string) (auth.Session, auth.User, error) {
	return sessionUser(ctx, s, idHash)
}

// SessionUser implements auth.Store.
func (s *PGStore) SessionUser(ctx context.Context, idHash string) (auth.Session, auth.User, error) {
	return sessionUser(ctx, s, idHash)
}

func sessionUser(ctx context.Context, e engine, idHash string) (auth.Session, auth.User, error) {
	var (
		ss               auth.Session
		cr, seen, expiry sql.NullInt64
	)
	u, err := credentialUser(ctx, e, qSessionUser, idHash, "session", &ss.UserID, &ss.Method, &cr, &seen, &expiry)
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
func credentialUser(ctx context.Context, e engine, q, key, what string, own ...any) (auth.User, error) {
	var (
		u       auth.User
		admin   int64
		created sql.NullInt64
	)
	err := e.row(ctx, q, key).Scan(append(own, scanUser(&u, &admin, &created)...)...)
	if isNoRows(err) {
		return u, notFound(what, "")
	}
	if err != nil {
		return u, e.wrapErr("get "+what, err)
	}
	u.Admin, u.CreatedAt = admin == 1, timeOf(created)
	return u, nil
}

// TouchSession implements auth.Store.
func (s *Store) TouchSession(ctx context.Context, idHash string, at time.Time) error {
	return execWrite(ctx, s, "touch session", `UPDATE sessions SET last_seen_at = ? WHERE id_hash = ?`, at.UnixNano(), idHash)
}

// TouchSession implements auth.Store.
func (s *PGStore) TouchSession(ctx context.Context, idHash string, at time.Time) error {
	return execWrite(ctx, s, "touch session", `UPDATE sessions SET last_seen_at = ? WHERE id_hash = ?`, at.UnixNano(), idHash)
}

// DeleteSession implements auth.Store; an unknown session is no error.
func (s *Store) DeleteSession(ctx context.Context, idHash string) error {
	return execWrite(ctx, s, "end session", `DELETE FROM sessions WHERE id_hash = ?`, idHash)
}

// DeleteSession implements auth.Store; an unknown session is no error.
func (s *PGStore) DeleteSession(ctx context.Context, idHash string) error {
	return execWrite(ctx, s, "end session", `DELETE FROM sessions WHERE id_hash = ?`, idHash)
}

// DeleteExpiredSessions implements auth.Store.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now, idleBefore time.Time) (int, error) {
	return deleteExpiredSessions(ctx, s, now, idleBefore)
}

// DeleteExpiredSessions implements auth.Store.
func (s *PGStore) DeleteExpiredSessions(ctx context.Context, now, idleBefore time.Time) (int, error) {
	return deleteExpiredSessions(ctx, s, now, idleBefore)
}

func deleteExpiredSessions(ctx context.Context, e engine, now, idleBefore time.Time) (int, error) {
	var n int64
	err := e.writeTx(ctx, "prune sessions", func(t tx) error {
		var err error
		n, err = t.exec(`DELETE FROM sessions WHERE expires_at <= ? OR last_seen_at < ?`, nanos(now), nanos(idleBefore))
		return err
	})
	return int(n), err
}

// PutToken implements auth.Store.
func (s *Store) PutToken(ctx context.Context, tk auth.Token) error { return putToken(ctx, s, tk) }

// PutToken implements auth.Store.
func (s *PGStore) PutToken(ctx context.Context, tk auth.Token) error { return putToken(ctx, s, tk) }

func putToken(ctx context.Context, e engine, tk auth.Token) error {
	var c enc
	args := []any{tk.ID, tk.Hash, tk.UserID, tk.Label, tk.Scope, tk.CreatedAt.UnixNano(), c.time("expires_at", tk.ExpiresAt)}
	if c.err != nil {
		return c.err
	}
	return e.writeTx(ctx, "create token", func(t tx) error {
		_, err := t.exec(`INSERT INTO api_tokens (id, token_hash, user_id, label, scope, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`, args...)
		if refusedByConstraint(err) {
			return notFound("user", tk.UserID)
		}
		return err
	})
}

// TokenUser implements auth.Store.
func (s *Store) TokenUser(ctx context.Context, hash string) (auth.Token, auth.User, error) {
	return tokenUser(ctx, s, hash)
}

// TokenUser implements auth.Store.
func (s *PGStore) TokenUser(ctx context.Context, hash string) (auth.Token, auth.User, error) {
	return tokenUser(ctx, s, hash)
}

func tokenUser(ctx context.Context, e engine, hash string) (auth.Token, auth.User, error) {
	var (
		tk                    auth.Token
		cr, expires, lastUsed sql.NullInt64
	)
	u, err := credentialUser(ctx, e, qTokenUser, hash, "token", &tk.ID, &tk.Label, &tk.Scope, &cr, &expires, &lastUsed)
	if err != nil {
		return tk, u, err
	}
	tk.Hash, tk.UserID, tk.CreatedAt, tk.ExpiresAt, tk.LastUsedAt = hash, u.ID, timeOf(cr), timeOf(expires), timeOf(lastUsed)
	return tk, u, nil
}

// TouchToken implements auth.Store.
func (s *Store) TouchToken(ctx context.Context, id string, at time.Time) error {
	return execWrite(ctx, s, "touch token", `UPDATE api_tokens SET last_used_at = ? WHERE id = ?`, at.UnixNano(), id)
}

// TouchToken implements auth.Store.
func (s *PGStore) TouchToken(ctx context.Context, id string, at time.Time) error {
	return execWrite(ctx, s, "touch token", `UPDATE api_tokens SET last_used_at = ? WHERE id = ?`, at.UnixNano(), id)
}

// DeleteToken implements auth.Store.
func (s *Store) DeleteToken(ctx context.Context, userID, id string) error {
	return deleteToken(ctx, s, userID, id)
}

// DeleteToken implements auth.Store.
func (s *PGStore) DeleteToken(ctx context.Context, userID, id string) error {
	return deleteToken(ctx, s, userID, id)
}

func deleteToken(ctx context.Context, e engine, userID, id string) error {
	return e.writeTx(ctx, "revoke token "+id, func(t tx) error {
		n, err := t.exec(`DELETE FROM api_tokens WHERE id = ? AND user_id = ?`, id, userID)
		if err == nil && n == 0 {
			err = notFound("token", id)
		}
		return err
	})
}

// execWrite runs one statement in a write transaction.
func execWrite(ctx context.Context, e engine, what, q string, args ...any) error {
	return e.writeTx(ctx, what, func(t tx) error {
		_, err := t.exec(q, args...)
		return err
	})
}
