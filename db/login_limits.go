package db

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/canvasapp/companion/auth"
)

// The failed-login limits' counts (auth decides what they mean). Both
// engines run the same statements, so a replica on PostgreSQL sees every
// other replica's failures, and SQLite keeps them across a restart.

// pruneLimit bounds the expired rows one login deletes, so a login's work
// does not grow with a flood of stale keys; each failure adds at most
// three rows, so pruning more than that per call keeps up.
const pruneLimit = "32"

const (
	qCountFailure = `INSERT INTO login_failures (key, ends_at, n) VALUES (?, ?, 1)
		ON CONFLICT (key) DO UPDATE SET
			n = CASE WHEN login_failures.ends_at <= ? THEN 1 ELSE login_failures.n + 1 END,
			ends_at = CASE WHEN login_failures.ends_at <= ? THEN excluded.ends_at ELSE login_failures.ends_at END`
	qPruneFailures = `DELETE FROM login_failures WHERE key IN
		(SELECT key FROM login_failures WHERE ends_at <= ? LIMIT ` + pruneLimit + `)`
	qPruneKnown = `DELETE FROM login_known WHERE key IN
		(SELECT key FROM login_known WHERE until < ? LIMIT ` + pruneLimit + `)`
	qKnown     = `SELECT until FROM login_known WHERE key = ?`
	qMarkKnown = `INSERT INTO login_known (key, until) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET until = excluded.until`
)

// LoginFailures returns the failure windows of keys still open at now and
// until when knownKey is a known (user, address); see auth.Store.
func (s *Store) LoginFailures(ctx context.Context, now time.Time, keys []string, knownKey string) (map[string]auth.FailureWindow, time.Time, error) {
	return loginFailures(ctx, s, now, keys, knownKey)
}

// LoginFailures: see Store.LoginFailures.
func (s *PGStore) LoginFailures(ctx context.Context, now time.Time, keys []string, knownKey string) (map[string]auth.FailureWindow, time.Time, error) {
	return loginFailures(ctx, s, now, keys, knownKey)
}

func loginFailures(ctx context.Context, e engine, now time.Time, keys []string, knownKey string) (map[string]auth.FailureWindow, time.Time, error) {
	open := map[string]auth.FailureWindow{}
	var known time.Time
	err := e.readTx(ctx, "read failed logins", func(t tx) error {
		if len(keys) > 0 {
			args := make([]any, 0, len(keys)+1)
			for _, k := range keys {
				args = append(args, k)
			}
			args = append(args, nanos(now))
			r, err := t.query(`SELECT key, ends_at, n FROM login_failures WHERE key IN (?`+
				strings.Repeat(", ?", len(keys)-1)+`) AND ends_at > ?`, args...)
			if err != nil {
				return err
			}
			_, err = scanRows(r, func(r scanner) (struct{}, error) {
				var (
					key  string
					ends sql.NullInt64
					n    int64
				)
				err := r.Scan(&key, &ends, &n)
				open[key] = auth.FailureWindow{N: int(n), Ends: timeOf(ends)}
				return struct{}{}, err
			})
			if err != nil {
				return err
			}
		}
		var until sql.NullInt64
		err := t.queryRow(qKnown, knownKey).Scan(&until)
		if isNoRows(err) {
			return nil
		}
		known = timeOf(until)
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return open, known, nil
}

// AddLoginFailure counts one failure for each key in one transaction; see
// auth.Store.
func (s *Store) AddLoginFailure(ctx context.Context, now time.Time, keys []auth.FailureKey) error {
	return addLoginFailure(ctx, s, now, keys)
}

// AddLoginFailure: see Store.AddLoginFailure.
func (s *PGStore) AddLoginFailure(ctx context.Context, now time.Time, keys []auth.FailureKey) error {
	return addLoginFailure(ctx, s, now, keys)
}

func addLoginFailure(ctx context.Context, e engine, now time.Time, keys []auth.FailureKey) error {
	at := nanos(now)
	return e.writeTx(ctx, "count a failed login", func(t tx) error {
		for _, k := range keys {
			if _, err := t.exec(qCountFailure, k.Key, nanos(now.Add(k.Window)), at, at); err != nil {
				return err
			}
		}
		if _, err := t.exec(qPruneFailures, at); err != nil {
			return err
		}
		_, err := t.exec(qPruneKnown, at)
		return err
	})
}

// LoginSucceeded forgets clearKey's failures and marks knownKey known
// until until; see auth.Store.
func (s *Store) LoginSucceeded(ctx context.Context, now time.Time, clearKey, knownKey string, until time.Time) error {
	return loginSucceeded(ctx, s, now, clearKey, knownKey, until)
}

// LoginSucceeded: see Store.LoginSucceeded.
func (s *PGStore) LoginSucceeded(ctx context.Context, now time.Time, clearKey, knownKey string, until time.Time) error {
	return loginSucceeded(ctx, s, now, clearKey, knownKey, until)
}

func loginSucceeded(ctx context.Context, e engine, now time.Time, clearKey, knownKey string, until time.Time) error {
	return e.writeTx(ctx, "record a sign-in", func(t tx) error {
		if _, err := t.exec(`DELETE FROM login_failures WHERE key = ?`, clearKey); err != nil {
			return err
		}
		if _, err := t.exec(qMarkKnown, knownKey, nanos(until)); err != nil {
			return err
		}
		_, err := t.exec(qPruneKnown, nanos(now))
		return err
	})
}
