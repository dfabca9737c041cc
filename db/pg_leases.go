package db

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/canvasapp/companion/core"
)

var _ core.WorkspaceLeases = (*PGStore)(nil)

// pgLeaseUpsert takes or renews a workspace's lease ($1) for a holder ($2)
// for $3 seconds of database time and returns the holder and the feed's
// revision, or no row when another holder's lease has not lapsed.
const pgLeaseUpsert = `INSERT INTO workspace_leases (workspace_id, holder, expires_at)
		VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))
		ON CONFLICT (workspace_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE workspace_leases.expires_at <= clock_timestamp() OR workspace_leases.holder = excluded.holder
		RETURNING holder, (SELECT value FROM meta WHERE key = 'rev')`

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
	err := s.pool.QueryRow(ctx, pgLeaseUpsert, id, holder, ttl.Seconds()).Scan(&got, &rev)
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

// TryLeaseWorkspaceRead takes the lease as TryLeaseWorkspace does and reads
// the workspace, in one round trip: the two statements go as one batch
// (one implicit transaction). Each statement takes its own snapshot under
// READ COMMITTED, so the read sees every change committed before the lease
// was taken, exactly as a GetWorkspace sent after it would. (One statement
// joining the lease's upsert to the row would not: its snapshot is taken
// before the upsert waits for a lease being released, and could miss the
// save that the previous holder committed just before releasing.)
func (s *PGStore) TryLeaseWorkspaceRead(ctx context.Context, id, holder string, ttl time.Duration) (core.LeaseRead, error) {
	var b pgx.Batch
	b.Queue(pgLeaseUpsert, id, holder, ttl.Seconds())
	b.Queue(pgText(qGetWorkspace), id)
	br := s.pool.SendBatch(ctx, &b)
	var (
		got  string
		read core.LeaseRead
	)
	err := br.QueryRow().Scan(&got, &read.Rev)
	held := err == nil && got == holder
	if err != nil && !isNoRows(err) {
		br.Close()
		return core.LeaseRead{}, s.wrap("lease workspace "+id, err)
	}
	ws, err := scanWorkspace(br.QueryRow())
	switch {
	case isNoRows(err):
	case err != nil:
		br.Close()
		return core.LeaseRead{}, s.wrap("lease and read workspace "+id, err)
	default:
		read.Found, read.Workspace = true, ws
	}
	// The batch commits at its end: only then is the lease held.
	if err := br.Close(); err != nil {
		return core.LeaseRead{}, s.wrap("lease workspace "+id, err)
	}
	if !held {
		return core.LeaseRead{}, nil
	}
	read.Held = true
	return read, nil
}

// pgSaveReleasing is pgSaveOne (saveOne) with the release of a lease in
// the same statement (a data-modifying CTE always runs), so both commit
// together. Its parameters are pgSaveOne's followed by the holder.
func pgSaveReleasing(saveOne string) string {
	return fmt.Sprintf(`WITH rl AS (DELETE FROM workspace_leases WHERE workspace_id = $1 AND holder = $%d), `, pgSaveOneParams+1) +
		strings.TrimPrefix(saveOne, "WITH ")
}

// SaveWorkspaceReleasing saves ws as SaveWorkspace does and drops holder's
// lease of ws.ID in the same statement: the lease ends when the save
// commits, and not at all if it fails. A lease that lapsed and was taken
// by another holder is left alone.
func (s *PGStore) SaveWorkspaceReleasing(ctx context.Context, ws core.Workspace, holder string) (core.Workspace, error) {
	return s.saveOne(ctx, pgq().saveReleasing, "save workspace "+ws.ID+" and release its lease", ws, holder)
}
