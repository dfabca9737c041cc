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
// lease now.
func (s *PGStore) TryLeaseWorkspace(ctx context.Context, id, holder string, ttl time.Duration) (bool, error) {
	var got string
	err := s.pool.QueryRow(ctx, `INSERT INTO workspace_leases (workspace_id, holder, expires_at)
		VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))
		ON CONFLICT (workspace_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE workspace_leases.expires_at <= clock_timestamp() OR workspace_leases.holder = excluded.holder
		RETURNING holder`, id, holder, ttl.Seconds()).Scan(&got)
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, s.wrap("lease workspace "+id, err)
	}
	return got == holder, nil
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
