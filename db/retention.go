package db

import (
	"context"
	"database/sql"
	"time"

	"github.com/canvasapp/companion/core"
)

// PutRetentionPolicy stores an account's retention policy, replacing the
// one it had. The policy goes when the account does.
func (s *Store) PutRetentionPolicy(ctx context.Context, p core.RetentionPolicy) error {
	var price any
	if p.StoragePricePerGiBMonth != nil {
		price = *p.StoragePricePerGiBMonth
	}
	return s.write(ctx, "save retention policy of account "+p.AccountID, func(t txn) error {
		res, err := t.exec(`INSERT INTO retention_policies (account_id, enabled, paused_for, warn_before, storage_price_per_gib_month, updated_at, exports_kept_for)
			SELECT id, ?, ?, ?, ?, ?, ? FROM accounts WHERE id = ?
			ON CONFLICT (account_id) DO UPDATE SET enabled = excluded.enabled, paused_for = excluded.paused_for,
				warn_before = excluded.warn_before, storage_price_per_gib_month = excluded.storage_price_per_gib_month,
				updated_at = excluded.updated_at, exports_kept_for = excluded.exports_kept_for`,
			p.Enabled, int64(p.PausedFor), int64(p.WarnBefore), price, nanos(p.UpdatedAt), int64(p.ExportsKeptFor), p.AccountID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return notFound("account", p.AccountID)
		}
		return nil
	})
}

// RetentionPolicies returns every stored policy.
func (s *Store) RetentionPolicies(ctx context.Context) ([]core.RetentionPolicy, error) {
	rows, err := s.reads().query(ctx, `SELECT `+retentionPolicyCols+` FROM retention_policies ORDER BY account_id`)
	if err != nil {
		return nil, wrap("list retention policies", err)
	}
	out, err := scanRows(liteRows{rows}, scanRetentionPolicy)
	if err != nil {
		return nil, wrap("list retention policies", err)
	}
	return out, nil
}

// Both candidate queries walk workspaces_retention (account_id,
// delete_after) for one account: their cost follows the scheduled
// workspaces that are due, not the store.
const (
	qRetentionDue = `SELECT w.id, w.account_id, w.delete_after FROM workspaces w
		LEFT JOIN retention_claims c ON c.workspace_id = w.id
		WHERE w.account_id = ?1 AND w.delete_after IS NOT NULL AND w.removed_at IS NULL AND w.delete_after <= ?2
			AND (c.workspace_id IS NULL OR c.not_before <= ?2)
		ORDER BY w.delete_after LIMIT ?3`
	qRetentionUnwarned = `SELECT w.id, w.account_id, w.delete_after FROM workspaces w
		LEFT JOIN retention_warnings r ON r.workspace_id = w.id AND r.delete_after = w.delete_after
		WHERE w.account_id = ?1 AND w.delete_after IS NOT NULL AND w.removed_at IS NULL AND w.delete_after <= ?2
			AND r.workspace_id IS NULL
		ORDER BY w.delete_after LIMIT ?3`
)

// RetentionDue returns the account's live workspaces due at now whose
// claim may be taken, soonest first.
func (s *Store) RetentionDue(ctx context.Context, accountID string, now time.Time, limit int) ([]core.RetentionCandidate, error) {
	return s.candidates(ctx, "list due workspaces", qRetentionDue, accountID, now, limit)
}

// RetentionUnwarned returns the account's live workspaces scheduled at or
// before until that were not warned about that time.
func (s *Store) RetentionUnwarned(ctx context.Context, accountID string, until time.Time, limit int) ([]core.RetentionCandidate, error) {
	return s.candidates(ctx, "list workspaces to warn", qRetentionUnwarned, accountID, until, limit)
}

func (s *Store) candidates(ctx context.Context, what, q, accountID string, at time.Time, limit int) ([]core.RetentionCandidate, error) {
	rows, err := s.reads().query(ctx, q, accountID, nanos(at), max(limit, 0))
	if err != nil {
		return nil, wrap(what, err)
	}
	defer rows.Close()
	var out []core.RetentionCandidate
	for rows.Next() {
		c, err := scanRetentionCandidate(rows)
		if err != nil {
			return nil, wrap(what, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(what, err)
	}
	return out, nil
}

// scanRetentionCandidate reads one row of the due and unwarned queries,
// the same on both engines.
func scanRetentionCandidate(r scanner) (core.RetentionCandidate, error) {
	var (
		c  core.RetentionCandidate
		da sql.NullInt64
	)
	err := r.Scan(&c.WorkspaceID, &c.AccountID, &da)
	c.DeleteAfter = timeOf(da)
	return c, err
}

// MarkRetentionWarned records the delete_after a workspace was warned
// about.
func (s *Store) MarkRetentionWarned(ctx context.Context, workspaceID string, deleteAfter time.Time) error {
	return markRetentionWarned(ctx, s, workspaceID, deleteAfter)
}

// MarkRetentionWarned: see Store.MarkRetentionWarned.
func (s *PGStore) MarkRetentionWarned(ctx context.Context, workspaceID string, deleteAfter time.Time) error {
	return markRetentionWarned(ctx, s, workspaceID, deleteAfter)
}

func markRetentionWarned(ctx context.Context, e engine, workspaceID string, deleteAfter time.Time) error {
	return e.writeTx(ctx, "record retention warning of "+workspaceID, func(t tx) error {
		_, err := t.exec(`INSERT INTO retention_warnings (workspace_id, delete_after) VALUES (?, ?)
			ON CONFLICT (workspace_id) DO UPDATE SET delete_after = excluded.delete_after`, workspaceID, nanos(deleteAfter))
		return err
	})
}

const claimCols = `workspace_id, holder, lease_until, attempts, launched, not_before, last_error`

// ClaimRetention takes the workspace's claim for holder: it is taken when
// nobody holds it, holder already does, or the holder's lease ran out, and
// only once its backoff is over. On SQLite the write transaction (BEGIN
// IMMEDIATE) serialises two processes on one file; on PostgreSQL the row
// is locked with FOR UPDATE SKIP LOCKED, so a replica that finds another
// one deciding on the same claim goes on to its next workspace instead of
// waiting, and the two can never both take it.
func (s *Store) ClaimRetention(ctx context.Context, workspaceID, holder string, now time.Time, lease time.Duration) (core.RetentionClaim, bool, error) {
	return claimRetention(ctx, s, workspaceID, holder, now, lease)
}

// ClaimRetention: see Store.ClaimRetention.
func (s *PGStore) ClaimRetention(ctx context.Context, workspaceID, holder string, now time.Time, lease time.Duration) (core.RetentionClaim, bool, error) {
	return claimRetention(ctx, s, workspaceID, holder, now, lease)
}

func claimRetention(ctx context.Context, e engine, workspaceID, holder string, now time.Time, lease time.Duration) (core.RetentionClaim, bool, error) {
	if holder == "" {
		return core.RetentionClaim{}, false, core.Errorf(core.KindInvalid, "a retention claim needs a holder")
	}
	var (
		c  core.RetentionClaim
		ok bool
	)
	err := e.writeTx(ctx, "claim workspace "+workspaceID+" for retention", func(t tx) error {
		// A first claim needs a row to lock; an unheld one is free to take.
		if _, err := t.exec(`INSERT INTO retention_claims (`+claimCols+`) VALUES (?, '', 0, 0, ?, 0, '')
			ON CONFLICT (workspace_id) DO NOTHING`, workspaceID, false); err != nil {
			return err
		}
		cur, err := scanClaim(t.queryRow(`SELECT `+claimCols+` FROM retention_claims WHERE workspace_id = ?`+
			t.skipLocked(), workspaceID))
		if isNoRows(err) {
			return nil // another replica is deciding on it right now
		}
		if err != nil {
			return err
		}
		free := cur.Holder == "" || cur.Holder == holder || !cur.LeaseUntil.After(now)
		if !free || cur.NotBefore.After(now) {
			return nil
		}
		c, err = scanClaim(t.queryRow(`UPDATE retention_claims SET holder = ?, lease_until = ?
			WHERE workspace_id = ? RETURNING `+claimCols, holder, nanos(now.Add(lease)), workspaceID))
		ok = err == nil
		return err
	})
	if err != nil {
		return core.RetentionClaim{}, false, err
	}
	return c, ok, nil
}

func scanClaim(r scanner) (core.RetentionClaim, error) {
	var (
		c                core.RetentionClaim
		lease, notBefore int64
		attempts         int64
		launched         bool
	)
	if err := r.Scan(&c.WorkspaceID, &c.Holder, &lease, &attempts, &launched, &notBefore, &c.LastError); err != nil {
		return core.RetentionClaim{}, err
	}
	c.LeaseUntil, c.NotBefore = claimTime(lease), claimTime(notBefore)
	c.Attempts, c.Launched = int(attempts), launched
	return c, nil
}

// claimTime reads a claim time: 0 stands for "none".
func claimTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func claimNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return nanos(t)
}

// SaveRetentionClaim writes c if asHolder still holds the claim (or
// nobody does); otherwise it is a KindConflict error and nothing changes.
func (s *Store) SaveRetentionClaim(ctx context.Context, asHolder string, c core.RetentionClaim) error {
	return saveRetentionClaim(ctx, s, asHolder, c)
}

// SaveRetentionClaim: see Store.SaveRetentionClaim.
func (s *PGStore) SaveRetentionClaim(ctx context.Context, asHolder string, c core.RetentionClaim) error {
	return saveRetentionClaim(ctx, s, asHolder, c)
}

func saveRetentionClaim(ctx context.Context, e engine, asHolder string, c core.RetentionClaim) error {
	return e.writeTx(ctx, "save retention claim of "+c.WorkspaceID, func(t tx) error {
		n, err := t.exec(`UPDATE retention_claims SET holder = ?, lease_until = ?, attempts = ?, launched = ?,
				not_before = ?, last_error = ?
			WHERE workspace_id = ? AND holder IN (?, '')`,
			c.Holder, claimNanos(c.LeaseUntil), c.Attempts, c.Launched, claimNanos(c.NotBefore), c.LastError,
			c.WorkspaceID, asHolder)
		if err == nil && n == 0 {
			err = core.Errorf(core.KindConflict, "the retention claim of workspace %s is held by another process", c.WorkspaceID)
		}
		return err
	})
}

// DropRetentionClaim forgets a workspace's claim.
func (s *Store) DropRetentionClaim(ctx context.Context, workspaceID string) error {
	return dropRetentionClaim(ctx, s, workspaceID)
}

// DropRetentionClaim: see Store.DropRetentionClaim.
func (s *PGStore) DropRetentionClaim(ctx context.Context, workspaceID string) error {
	return dropRetentionClaim(ctx, s, workspaceID)
}

func dropRetentionClaim(ctx context.Context, e engine, workspaceID string) error {
	return e.writeTx(ctx, "drop retention claim of "+workspaceID, func(t tx) error {
		_, err := t.exec(`DELETE FROM retention_claims WHERE workspace_id = ?`, workspaceID)
		return err
	})
}

// SweepRetention forgets the claims of workspaces that are gone or no
// longer scheduled and not being deleted (a resumed workspace starts its
// next pause without a backoff), and the warnings whose delete_after no
// longer stands among the next warnLimit warnings after warnAfter (by
// workspace id). It returns where the next sweep should go on from, ""
// after the last warning: each sweep costs a bounded slice of the table.
func (s *Store) SweepRetention(ctx context.Context, warnAfter string, warnLimit int) (string, error) {
	next := ""
	err := s.write(ctx, "sweep retention claims", func(t txn) error {
		if _, err := t.exec(`DELETE FROM retention_claims WHERE NOT EXISTS (
				SELECT 1 FROM workspaces w WHERE w.id = retention_claims.workspace_id AND w.removed_at IS NULL
					AND (w.delete_after IS NOT NULL OR w.state = 'deleting'))`); err != nil {
			return err
		}
		if warnLimit <= 0 {
			return nil
		}
		var last sql.NullString
		if err := t.queryRow(`SELECT max(workspace_id) FROM (SELECT workspace_id FROM retention_warnings
			WHERE workspace_id > ? ORDER BY workspace_id LIMIT ?)`, warnAfter, warnLimit).Scan(&last); err != nil {
			return err
		}
		if !last.Valid {
			return nil // past the last one: start again next time
		}
		next = last.String
		_, err := t.exec(`DELETE FROM retention_warnings WHERE workspace_id > ? AND workspace_id <= ? AND NOT EXISTS (
			SELECT 1 FROM workspaces w WHERE w.id = retention_warnings.workspace_id AND w.removed_at IS NULL
				AND w.delete_after = retention_warnings.delete_after)`, warnAfter, next)
		return err
	})
	if err != nil {
		return "", err
	}
	return next, nil
}

var _ core.RetentionStore = (*Store)(nil)

// qRetentionPolicy reads one account's policy (both engines).
const qRetentionPolicy = `SELECT ` + retentionPolicyCols + ` FROM retention_policies WHERE account_id = ?`

// retentionPolicyCols are the columns scanRetentionPolicy reads.
const retentionPolicyCols = `account_id, enabled, paused_for, warn_before, storage_price_per_gib_month, updated_at, exports_kept_for`

// scanRetentionPolicy reads one row of qRetentionPolicy's columns.
func scanRetentionPolicy(r scanner) (core.RetentionPolicy, error) {
	var (
		p           core.RetentionPolicy
		paused, wb  int64
		kept        int64
		price       sql.NullFloat64
		updatedNano sql.NullInt64
	)
	if err := r.Scan(&p.AccountID, &p.Enabled, &paused, &wb, &price, &updatedNano, &kept); err != nil {
		return p, err
	}
	p.PausedFor, p.WarnBefore, p.UpdatedAt = time.Duration(paused), time.Duration(wb), timeOf(updatedNano)
	p.ExportsKeptFor = time.Duration(kept)
	if price.Valid {
		v := price.Float64
		p.StoragePricePerGiBMonth = &v
	}
	return p, nil
}

// RetentionPolicy returns one account's stored policy; ok is false when
// it has none.
func (s *Store) RetentionPolicy(ctx context.Context, accountID string) (core.RetentionPolicy, bool, error) {
	return retentionPolicy(ctx, s, accountID)
}

// retentionPolicy is RetentionPolicy on either engine.
func retentionPolicy(ctx context.Context, e engine, accountID string) (core.RetentionPolicy, bool, error) {
	p, err := scanRetentionPolicy(e.row(ctx, qRetentionPolicy, accountID))
	if isNoRows(err) {
		return core.RetentionPolicy{}, false, nil
	}
	if err != nil {
		return core.RetentionPolicy{}, false, e.wrapErr("read the retention policy of account "+accountID, err)
	}
	return p, true, nil
}
