package db

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/canvasapp/companion/core"

	"github.com/jackc/pgx/v5"
)

var (
	_ core.AccountLeases = (*PGStore)(nil)
	_ core.OpClaims      = (*PGStore)(nil)
)

// TryLeaseAccount takes the reconciler's lease of an account for holder
// until ttl from now (database time), if no other holder has an unexpired
// one; the same holder taking it again renews it.
func (s *PGStore) TryLeaseAccount(ctx context.Context, accountID, holder string, ttl time.Duration) (bool, error) {
	var got string
	err := s.pool.QueryRow(ctx, `INSERT INTO account_leases (account_id, holder, expires_at)
		VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))
		ON CONFLICT (account_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE account_leases.expires_at <= clock_timestamp() OR account_leases.holder = excluded.holder
		RETURNING holder`, accountID, holder, ttl.Seconds()).Scan(&got)
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, s.wrap("lease account "+accountID, err)
	}
	return got == holder, nil
}

// ReleaseAccountLease drops holder's lease of an account; one taken over
// by another holder is left alone.
func (s *PGStore) ReleaseAccountLease(ctx context.Context, accountID, holder string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM account_leases WHERE account_id = $1 AND holder = $2`, accountID, holder); err != nil {
		return s.wrap("release lease of account "+accountID, err)
	}
	return nil
}

// ClaimOp takes (or renews) holder's claim of journal entry id for ttl.
func (s *PGStore) ClaimOp(ctx context.Context, id int64, holder string, ttl time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE ops SET claim_holder = $2, claim_until = clock_timestamp() + make_interval(secs => $3)
		WHERE id = $1 AND (claim_holder = $2 OR claim_until IS NULL OR claim_until <= clock_timestamp())`, id, holder, ttl.Seconds())
	if err != nil {
		return false, s.wrap(fmt.Sprintf("claim journal entry %d", id), err)
	}
	return tag.RowsAffected() == 1, nil
}

// ClaimLapsedOps claims the oldest entries whose claim lapsed (or was
// never taken) and whose workspace has no live lease. The rows are locked
// with FOR UPDATE SKIP LOCKED, so two replicas running this at once each
// get other rows, never the same one, and neither waits for the other.
func (s *PGStore) ClaimLapsedOps(ctx context.Context, holder string, ttl time.Duration, limit int) ([]core.Op, error) {
	var ops []core.Op
	err := s.write(ctx, "claim journal entries", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE ops SET claim_holder = $1, claim_until = clock_timestamp() + make_interval(secs => $2)
			WHERE id IN (
				SELECT o.id FROM ops o
				WHERE (o.claim_until IS NULL OR o.claim_until <= clock_timestamp())
					AND NOT EXISTS (SELECT 1 FROM workspace_leases l
						WHERE l.workspace_id = o.workspace_id AND l.expires_at > clock_timestamp())
				ORDER BY o.id LIMIT $3
				FOR UPDATE OF o SKIP LOCKED)
			RETURNING `+opCols, holder, ttl.Seconds(), max(limit, 0))
		if err != nil {
			return err
		}
		ops, err = pgScanAll(rows, scanOp)
		return err
	})
	if err != nil {
		return nil, err
	}
	sortOps(ops)
	return ops, nil
}

// RenewOpClaims extends holder's claims of ids, takes again those that
// lapsed while nobody took them, and returns the ids another holder
// claims now (a closed entry is in neither list).
func (s *PGStore) RenewOpClaims(ctx context.Context, holder string, ids []int64, ttl time.Duration) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `WITH renewed AS (
			UPDATE ops SET claim_holder = $1, claim_until = clock_timestamp() + make_interval(secs => $3)
			WHERE id = ANY($2) AND (claim_holder = $1 OR claim_until IS NULL OR claim_until <= clock_timestamp())
			RETURNING id)
		SELECT id FROM ops WHERE id = ANY($2) AND id NOT IN (SELECT id FROM renewed)`, holder, ids, ttl.Seconds())
	if err != nil {
		return nil, s.wrap("renew journal claims", err)
	}
	lost, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, s.wrap("renew journal claims", err)
	}
	return lost, nil
}

// ReleaseOpClaim lets go of holder's claim of entry id.
func (s *PGStore) ReleaseOpClaim(ctx context.Context, id int64, holder string) error {
	_, err := s.pool.Exec(ctx, `UPDATE ops SET claim_holder = '', claim_until = NULL WHERE id = $1 AND claim_holder = $2`, id, holder)
	if err != nil {
		return s.wrap(fmt.Sprintf("release claim of journal entry %d", id), err)
	}
	return nil
}

// OpsOfWorkspace returns a workspace's open journal entries, oldest first.
func (s *PGStore) OpsOfWorkspace(ctx context.Context, workspaceID string) ([]core.Op, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+opCols+` FROM ops WHERE workspace_id = $1 ORDER BY id`, workspaceID)
	if err != nil {
		return nil, s.wrap("read journal of workspace "+workspaceID, err)
	}
	ops, err := pgScanAll(rows, scanOp)
	if err != nil {
		return nil, s.wrap("read journal of workspace "+workspaceID, err)
	}
	return ops, nil
}

// sortOps orders entries oldest first (UPDATE … RETURNING has no order).
func sortOps(ops []core.Op) {
	slices.SortFunc(ops, func(a, b core.Op) int { return cmp.Compare(a.ID, b.ID) })
}

var _ core.RetentionWarnOnce = (*PGStore)(nil)

// MarkRetentionWarnedOnce records the delete_after a workspace was warned
// about in one statement, and reports whether the row was new or changed:
// of two replicas recording the same warning, one hears true.
func (s *PGStore) MarkRetentionWarnedOnce(ctx context.Context, workspaceID string, deleteAfter time.Time) (bool, error) {
	var id string
	err := s.pool.QueryRow(ctx, `INSERT INTO retention_warnings (workspace_id, delete_after) VALUES ($1, $2)
		ON CONFLICT (workspace_id) DO UPDATE SET delete_after = excluded.delete_after
		WHERE retention_warnings.delete_after IS DISTINCT FROM excluded.delete_after
		RETURNING workspace_id`, workspaceID, nanos(deleteAfter)).Scan(&id)
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, s.wrap("record retention warning of "+workspaceID, err)
	}
	return true, nil
}
