package db

import (
	"context"
	"time"

	"github.com/canvasapp/companion/core"
)

var _ core.WorkspaceLeases = (*PGStore)(nil)

// TryLeaseWorkspace takes the lease of workspace id for holder until ttl
// from now (database time), if no other holder has an unexpired one; the
// same holder taking it again renews it. It reports whether holder has the
// lease now and, when it does, the feed revision as of taking it (read in
// the same statement, so every change committed before it is at or below).
func (s *PGStore) TryLeaseWorkspace(ctx context.Context, id, holder string, ttl time.Duration) (bool, int64, error) {
	var (
		got string
		rev int64
	)
	err := s.pool.QueryRow(ctx, `INSERT INTO workspace_leases (workspace_id, holder, expires_at)
		VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))
		ON CONFLICT (workspace_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE workspace_leases.expires_at <= clock_timestamp() OR workspace_leases.holder = excluded.holder
		RETURNING holder, (SELECT value FROM meta WHERE key = 'rev')`, id, holder, ttl.Seconds()).Scan(&got, &rev)
	if isNoRows(err) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, s.wrap("lease workspace "+id, err)
	}
	return got == holder, rev, nil
}

// ReleaseWorkspaceLease drops holder's lease of id; a lease that lapsed
// and was taken by another holder is left alone.
func (s *PGStore) ReleaseWorkspaceLease(ctx context.Context, id, holder string) error {
	// One autocommitted statement: a transaction around it would add two
	// round trips to every action.
	if _, err := s.pool.Exec(ctx, `DELETE FROM workspace_leases WHERE workspace_id = $1 AND holder = $2`, id, holder); err != nil {
		return s.wrap("release lease of workspace "+id, err)
	}
	return nil
}
