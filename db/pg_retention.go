package db

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/core"

	"github.com/jackc/pgx/v5"
)

var _ core.RetentionStore = (*PGStore)(nil)

// pgNumbered writes SQLite's numbered ?N placeholders as PostgreSQL's $N,
// whatever N is; it panics on a bare ? (SQLite's unnumbered form), which
// has no $ equivalent without counting. The query is made at first use,
// not at package init, which runs at every start of the binary.
func pgNumbered(q string) func() string {
	return sync.OnceValue(func() string {
		var b strings.Builder
		for i := 0; i < len(q); i++ {
			if q[i] != '?' {
				b.WriteByte(q[i])
				continue
			}
			if i+1 >= len(q) || q[i+1] < '0' || q[i+1] > '9' {
				panic("db: pgNumbered: a ? without a number in " + q)
			}
			b.WriteByte('$')
		}
		return b.String()
	})
}

var (
	pgRetentionDue      = pgNumbered(qRetentionDue)
	pgRetentionUnwarned = pgNumbered(qRetentionUnwarned)
)

// PutRetentionPolicy stores an account's retention policy, replacing the
// one it had.
func (s *PGStore) PutRetentionPolicy(ctx context.Context, p core.RetentionPolicy) error {
	var price any
	if p.StoragePricePerGiBMonth != nil {
		price = *p.StoragePricePerGiBMonth
	}
	return s.execOne(ctx, "save retention policy of account "+p.AccountID, notFound("account", p.AccountID),
		`INSERT INTO retention_policies (account_id, enabled, paused_for, warn_before, storage_price_per_gib_month, updated_at, exports_kept_for)
		SELECT id, $1::boolean, $2::bigint, $3::bigint, $4::double precision, $5::bigint, $7::bigint FROM accounts WHERE id = $6
		ON CONFLICT (account_id) DO UPDATE SET enabled = excluded.enabled, paused_for = excluded.paused_for,
			warn_before = excluded.warn_before, storage_price_per_gib_month = excluded.storage_price_per_gib_month,
			updated_at = excluded.updated_at, exports_kept_for = excluded.exports_kept_for`,
		p.Enabled, int64(p.PausedFor), int64(p.WarnBefore), price, nanos(p.UpdatedAt), p.AccountID, int64(p.ExportsKeptFor))
}

// RetentionPolicies returns every stored policy.
func (s *PGStore) RetentionPolicies(ctx context.Context) ([]core.RetentionPolicy, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+retentionPolicyCols+` FROM retention_policies ORDER BY account_id COLLATE "C"`)
	if err != nil {
		return nil, s.wrap("list retention policies", err)
	}
	list, err := pgScanAll(rows, scanRetentionPolicy)
	if err != nil {
		return nil, s.wrap("list retention policies", err)
	}
	return list, nil
}

// RetentionDue returns the account's live workspaces due at now whose
// claim may be taken, soonest first.
func (s *PGStore) RetentionDue(ctx context.Context, accountID string, now time.Time, limit int) ([]core.RetentionCandidate, error) {
	return s.candidates(ctx, "list due workspaces", pgRetentionDue(), accountID, now, limit)
}

// RetentionUnwarned returns the account's live workspaces scheduled at or
// before until that were not warned about that time.
func (s *PGStore) RetentionUnwarned(ctx context.Context, accountID string, until time.Time, limit int) ([]core.RetentionCandidate, error) {
	return s.candidates(ctx, "list workspaces to warn", pgRetentionUnwarned(), accountID, until, limit)
}

func (s *PGStore) candidates(ctx context.Context, what, q, accountID string, at time.Time, limit int) ([]core.RetentionCandidate, error) {
	rows, err := s.pool.Query(ctx, q, accountID, nanos(at), max(limit, 0))
	if err != nil {
		return nil, s.wrap(what, err)
	}
	list, err := pgScanAll(rows, scanRetentionCandidate)
	if err != nil {
		return nil, s.wrap(what, err)
	}
	return list, nil
}

// SweepRetention does what Store.SweepRetention does; workspace ids are
// compared in byte order, as SQLite does.
func (s *PGStore) SweepRetention(ctx context.Context, warnAfter string, warnLimit int) (string, error) {
	next := ""
	err := s.write(ctx, "sweep retention claims", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM retention_claims WHERE NOT EXISTS (
				SELECT 1 FROM workspaces w WHERE w.id = retention_claims.workspace_id AND w.removed_at IS NULL
					AND (w.delete_after IS NOT NULL OR w.state = 'deleting'))`); err != nil {
			return err
		}
		if warnLimit <= 0 {
			return nil
		}
		var last sql.NullString
		if err := tx.QueryRow(ctx, `SELECT max(workspace_id COLLATE "C") FROM (SELECT workspace_id FROM retention_warnings
			WHERE workspace_id COLLATE "C" > $1 ORDER BY workspace_id COLLATE "C" LIMIT $2) AS page`, warnAfter, warnLimit).Scan(&last); err != nil {
			return err
		}
		if !last.Valid {
			return nil
		}
		next = last.String
		_, err := tx.Exec(ctx, `DELETE FROM retention_warnings WHERE workspace_id COLLATE "C" > $1 AND workspace_id COLLATE "C" <= $2 AND NOT EXISTS (
			SELECT 1 FROM workspaces w WHERE w.id = retention_warnings.workspace_id AND w.removed_at IS NULL
				AND w.delete_after = retention_warnings.delete_after)`, warnAfter, next)
		return err
	})
	if err != nil {
		return "", err
	}
	return next, nil
}

// RetentionPolicy returns one account's stored policy; ok is false when
// it has none. Replicas read it when another one announces a change.
func (s *PGStore) RetentionPolicy(ctx context.Context, accountID string) (core.RetentionPolicy, bool, error) {
	return retentionPolicy(ctx, s, accountID)
}
