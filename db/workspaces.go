package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/canvasapp/companion/core"
)

// workspaceCols is the column list every workspace query selects, in the
// order scanWorkspace reads.
const workspaceCols = `id, owner, name, account_id, provider, state, box_id, box_url, adopted,
	idle_pause_after, paused_ttl, options, paused_at, last_activity_at,
	size_bytes, size_source, size_at, keep, delete_after, error,
	created_at, updated_at, rev, removed_at, stop_reason, exit_code,
	last_export_at, last_export_id, deletion_clock, deletion_due_at, at_risk, export_by, box_created_at`

// upsertWorkspace writes a whole workspace row. A tombstone keeps the time
// of its first removal, so re-saving it does not postpone its pruning.
const qUpsertWorkspace = `INSERT INTO workspaces (` + workspaceCols + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (id) DO UPDATE SET
		owner = excluded.owner, name = excluded.name, account_id = excluded.account_id,
		provider = excluded.provider, state = excluded.state, box_id = excluded.box_id,
		box_url = excluded.box_url, adopted = excluded.adopted,
		idle_pause_after = excluded.idle_pause_after, paused_ttl = excluded.paused_ttl,
		options = excluded.options, paused_at = excluded.paused_at,
		last_activity_at = excluded.last_activity_at, size_bytes = excluded.size_bytes,
		size_source = excluded.size_source, size_at = excluded.size_at, keep = excluded.keep,
		delete_after = excluded.delete_after, error = excluded.error,
		created_at = excluded.created_at, updated_at = excluded.updated_at, rev = excluded.rev,
		stop_reason = excluded.stop_reason, exit_code = excluded.exit_code,
		last_export_at = excluded.last_export_at, last_export_id = excluded.last_export_id,
		deletion_clock = excluded.deletion_clock, deletion_due_at = excluded.deletion_due_at, at_risk = excluded.at_risk,
		export_by = excluded.export_by, box_created_at = excluded.box_created_at,
		removed_at = CASE WHEN excluded.removed_at IS NULL THEN NULL
			ELSE coalesce(workspaces.removed_at, excluded.removed_at) END
	RETURNING ` + workspaceCols

const (
	qGetWorkspace = `SELECT ` + workspaceCols + ` FROM workspaces WHERE id = ?`
	qBumpRev      = `UPDATE meta SET value = value + 1 WHERE key = 'rev' RETURNING value`
	qFeedHead     = `SELECT (SELECT value FROM meta WHERE key = 'rev'), (SELECT value FROM meta WHERE key = 'floor')`
	qChangesSince = `SELECT ` + workspaceCols + ` FROM workspaces WHERE rev > ? ORDER BY rev`
	qListLive     = `SELECT ` + workspaceCols + ` FROM workspaces WHERE removed_at IS NULL ORDER BY rev`
)

// WorkspaceSQL is the SQL the SQLite store runs to list live workspaces and
// to save one (bump the revision, then upsert the row with Cols columns,
// the revision at RevArg). It is exported for the benchmark that runs the
// very same statements through the bare driver as its baseline.
type WorkspaceSQL struct {
	List, BumpRev, Upsert string
	Cols, RevArg          int
}

// SQLiteWorkspaceSQL returns the statements; see WorkspaceSQL.
func SQLiteWorkspaceSQL() WorkspaceSQL {
	return WorkspaceSQL{List: qListLive, BumpRev: qBumpRev, Upsert: qUpsertWorkspace,
		Cols: len(splitCols(workspaceCols)), RevArg: revArg}
}

// GetWorkspace returns the workspace with id. Tombstones (Removed set) are
// returned too, until pruned: core uses them to recognise a box whose
// workspace was deleted, so it is not adopted again.
func (s *Store) GetWorkspace(ctx context.Context, id string) (core.Workspace, error) {
	row := s.reads().queryRow(ctx, qGetWorkspace, id)
	ws, err := scanWorkspace(row)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Workspace{}, notFound("workspace", id)
	}
	if err != nil {
		return core.Workspace{}, wrap("get workspace "+id, err)
	}
	return ws, nil
}

// ListWorkspaces returns every workspace that is not a tombstone, oldest
// change first.
func (s *Store) ListWorkspaces(ctx context.Context) ([]core.Workspace, error) {
	// A whole list waits for the read pool rather than hold the write
	// connection for as long as it takes.
	s.WarmReads()
	select {
	case <-s.warm:
	case <-ctx.Done():
		return nil, wrap("list workspaces", ctx.Err())
	}
	rows, err := s.rs.query(ctx, qListLive)
	if err != nil {
		return nil, wrap("list workspaces", err)
	}
	list, err := scanWorkspaces(rows)
	if err != nil {
		return nil, wrap("list workspaces", err)
	}
	return list, nil
}

// SaveWorkspace inserts or replaces ws. In one transaction it takes the
// next feed revision (the counter lives in the meta table, so it survives
// restarts and never goes back) and writes the row with that Rev and with
// UpdatedAt set to now. It returns the workspace as stored: times in UTC.
// Saving with Removed set makes the row a tombstone, which only Get and
// Changes return.
func (s *Store) SaveWorkspace(ctx context.Context, ws core.Workspace) (core.Workspace, error) {
	args, err := s.workspaceArgs(ws)
	if err != nil {
		return ws, err
	}
	var saved core.Workspace
	err = s.write(ctx, "save workspace "+ws.ID, func(t txn) error {
		var err error
		saved, err = saveWorkspace(t, args)
		return err
	})
	if err != nil {
		return ws, err
	}
	return saved, nil
}

// SaveWorkspaces saves many workspaces in one transaction, each with its
// own revision, as SaveWorkspace would one by one: for bulk imports (and
// seeding large stores in tests), where a commit per row would dominate.
func (s *Store) SaveWorkspaces(ctx context.Context, list []core.Workspace) error {
	all := make([][]any, len(list))
	for i, ws := range list {
		args, err := s.workspaceArgs(ws)
		if err != nil {
			return err
		}
		all[i] = args
	}
	return s.write(ctx, fmt.Sprintf("save %d workspaces", len(list)), func(t txn) error {
		for _, args := range all {
			if _, err := saveWorkspace(t, args); err != nil {
				return err
			}
		}
		return nil
	})
}

// workspaceArgs are ws's columns for qUpsertWorkspace; the revision is
// filled in by saveWorkspace.
func (s *Store) workspaceArgs(ws core.Workspace) ([]any, error) {
	return workspaceArgsAt(ws, s.now().UTC())
}

// workspaceArgsAt is workspaceArgs with the save time given (both engines
// share it).
func workspaceArgsAt(ws core.Workspace, now time.Time) ([]any, error) {
	if ws.ID == "" {
		return nil, core.Errorf(core.KindInvalid, "a workspace needs an id")
	}
	var e enc
	var sizeBytes, sizeSource, sizeAt any
	if ws.Size != nil {
		sizeBytes, sizeSource, sizeAt = ws.Size.Bytes, string(ws.Size.Source), e.time("size_at", ws.Size.At)
	}
	var exitCode any
	if ws.ExitCode != nil {
		exitCode = int64(*ws.ExitCode)
	}
	var removedAt any
	if ws.Removed {
		removedAt = e.time("removed_at", now)
	}
	args := []any{
		ws.ID, ws.Owner, ws.Name, ws.AccountID, ws.Provider, string(ws.State), ws.BoxID, ws.BoxURL, ws.Adopted,
		int64(ws.Lifecycle.IdlePauseAfter), int64(ws.Lifecycle.PausedTTL), e.json("options", ws.Options, ws.Options == nil),
		e.time("paused_at", ws.PausedAt), e.time("last_activity_at", ws.LastActivityAt),
		sizeBytes, sizeSource, sizeAt, ws.Keep, e.time("delete_after", ws.DeleteAfter), ws.Error,
		e.time("created_at", ws.CreatedAt), e.time("updated_at", now), nil, removedAt,
		string(ws.StopReason), exitCode,
		e.time("last_export_at", ws.LastExportAt), ws.LastExportID, ws.DeletionClock, e.time("deletion_due_at", ws.DeletionDueAt), ws.AtRisk,
		e.time("export_by", ws.ExportBy), e.time("box_created_at", ws.BoxCreatedAt),
	}
	return args, e.err
}

// revArg is the index of the rev column in workspaceArgs.
const revArg = 22

// saveWorkspace bumps the revision and upserts one row.
func saveWorkspace(t txn, args []any) (core.Workspace, error) {
	var rev int64
	if err := t.queryRow(qBumpRev).Scan(&rev); err != nil {
		return core.Workspace{}, err
	}
	args[revArg] = rev
	return scanWorkspace(t.queryRow(qUpsertWorkspace, args...))
}

// Changes returns the workspaces (tombstones included) changed after
// revision since, in revision order, and the current revision, all from
// one snapshot. complete is false, and nothing is read beyond the two
// counters, when since is newer than the current revision or older than
// the floor: the highest revision of a pruned tombstone, whose removal can
// no longer be replayed.
func (s *Store) Changes(ctx context.Context, since int64) (changes []core.Workspace, rev int64, complete bool, err error) {
	err = s.read(ctx, "read changes", func(t txn) error {
		var floor int64
		if err := t.queryRow(qFeedHead).Scan(&rev, &floor); err != nil {
			return err
		}
		if since > rev || since < floor {
			return nil
		}
		rows, err := t.query(qChangesSince, since)
		if err != nil {
			return err
		}
		changes, err = scanWorkspaces(rows)
		complete = err == nil
		return err
	})
	if err != nil {
		return nil, 0, false, err
	}
	return changes, rev, complete, nil
}

// PruneTombstones deletes the tombstones that were removed before cutoff
// or are not among the keep newest (by revision), and raises the floor to
// the highest revision deleted. Delete plans of pruned workspaces go with
// them.
func (s *Store) PruneTombstones(ctx context.Context, cutoff time.Time, keep int) error {
	keep = max(keep, 0)
	return s.write(ctx, "prune tombstones", func(t txn) error {
		// SQLite takes no DML in a CTE, so the highest deleted revision
		// is found by reading what DELETE returns.
		rows, err := t.query(`DELETE FROM workspaces
			WHERE removed_at IS NOT NULL AND (removed_at < ?1 OR rev NOT IN (
				SELECT rev FROM workspaces WHERE removed_at IS NOT NULL ORDER BY rev DESC LIMIT ?2))
			RETURNING rev`, nanos(cutoff), keep)
		if err != nil {
			return err
		}
		top := int64(-1)
		for rows.Next() {
			var rev int64
			if err := rows.Scan(&rev); err != nil {
				rows.Close()
				return err
			}
			top = max(top, rev)
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		if err := rows.Close(); err != nil || top < 0 {
			return err
		}
		_, err = t.exec(`UPDATE meta SET value = max(value, ?) WHERE key = 'floor'`, top)
		return err
	})
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanWorkspace(r scanner) (core.Workspace, error) {
	return newWorkspaceRow().scan(r)
}

// workspaceRow holds the scan targets of one workspace row. A list reuses
// one for every row: the targets and the argument slice escape to the
// heap through Scan, and allocating them per row cost a list of 10,000
// workspaces a tenth of its time.
type workspaceRow struct {
	ws                                    core.Workspace
	state, sizeSource                     sql.NullString
	options                               sql.NullString
	idle, ttl                             int64
	sizeBytes                             sql.NullInt64
	pausedAt, activity, sizeAt, deleteAft sql.NullInt64
	created, updated, removed             sql.NullInt64
	stopReason                            string
	exitCode                              sql.NullInt64
	lastExport, deletionDue, exportBy     sql.NullInt64
	boxCreated                            sql.NullInt64
	dest                                  []any
}

func newWorkspaceRow() *workspaceRow {
	x := &workspaceRow{}
	ws := &x.ws
	x.dest = []any{&ws.ID, &ws.Owner, &ws.Name, &ws.AccountID, &ws.Provider, &x.state, &ws.BoxID, &ws.BoxURL, &ws.Adopted,
		&x.idle, &x.ttl, &x.options, &x.pausedAt, &x.activity,
		&x.sizeBytes, &x.sizeSource, &x.sizeAt, &ws.Keep, &x.deleteAft, &ws.Error,
		&x.created, &x.updated, &ws.Rev, &x.removed, &x.stopReason, &x.exitCode,
		&x.lastExport, &ws.LastExportID, &ws.DeletionClock, &x.deletionDue, &ws.AtRisk, &x.exportBy, &x.boxCreated}
	return x
}

// scan reads the current row of r. Scan sets every target, so nothing
// of the previous row carries over.
func (x *workspaceRow) scan(r scanner) (core.Workspace, error) {
	if err := r.Scan(x.dest...); err != nil {
		return core.Workspace{}, err
	}
	ws := x.ws
	var err error
	ws.State = core.State(x.state.String)
	ws.Lifecycle = core.Lifecycle{IdlePauseAfter: time.Duration(x.idle), PausedTTL: time.Duration(x.ttl)}
	if ws.Options, err = mapOf("options of workspace", ws.ID, x.options); err != nil {
		return core.Workspace{}, err
	}
	ws.PausedAt, ws.LastActivityAt = timeOf(x.pausedAt), timeOf(x.activity)
	ws.Size = nil
	if x.sizeBytes.Valid {
		ws.Size = &core.Size{Bytes: x.sizeBytes.Int64, Source: core.SizeSource(x.sizeSource.String), At: timeOf(x.sizeAt)}
	}
	ws.DeleteAfter = timeOf(x.deleteAft)
	ws.CreatedAt, ws.UpdatedAt = timeOf(x.created), timeOf(x.updated)
	ws.Removed = x.removed.Valid
	ws.StopReason = core.StopReason(x.stopReason)
	ws.LastExportAt, ws.DeletionDueAt, ws.ExportBy = timeOf(x.lastExport), timeOf(x.deletionDue), timeOf(x.exportBy)
	ws.BoxCreatedAt = timeOf(x.boxCreated)
	ws.ExitCode = nil
	if x.exitCode.Valid {
		c := int(x.exitCode.Int64)
		ws.ExitCode = &c
	}
	return ws, nil
}

func scanWorkspaces(rows *sql.Rows) ([]core.Workspace, error) {
	defer rows.Close()
	var list []core.Workspace
	x := newWorkspaceRow()
	for rows.Next() {
		ws, err := x.scan(rows)
		if err != nil {
			return nil, err
		}
		list = append(list, ws)
	}
	return list, rows.Err()
}
