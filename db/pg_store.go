package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/core"

	"github.com/jackc/pgx/v5"
)

var (
	_ core.Store       = (*PGStore)(nil)
	_ core.AuditLog    = (*PGStore)(nil)
	_ core.ExportStore = (*PGStore)(nil)
)

// pgQueries are PostgreSQL's statements that are more than pgText's
// placeholder rewrite of a shared query. They are built once, when a
// PostgreSQL store first needs them, rather than at package init: every
// start of the binary pays for init, a desktop that never opens
// PostgreSQL included.
type pgQueries struct {
	listExports            string // ties in byte order, as SQLite
	ownerExports           string // qOwnerExports, ties in byte order
	ownerExportsBefore     string // qOwnerExportsBefore, ties in byte order
	saveOne, saveReleasing string // pgSaveOne and pgSaveReleasing
	upsertLogged           string // qUpsertWorkspace, logged (pgLogged)
}

var pgq = sync.OnceValue(func() *pgQueries {
	saveOne := pgSaveOne()
	return &pgQueries{
		listExports:  pgSQL(strings.Replace(qListExports, "id DESC", `id COLLATE "C" DESC`, 1)),
		ownerExports: pgSQL(strings.Replace(qOwnerExports, "id DESC", `id COLLATE "C" DESC`, 1)),
		ownerExportsBefore: pgSQL(strings.NewReplacer("id DESC", `id COLLATE "C" DESC`,
			"id < ?", `id COLLATE "C" < ?`).Replace(qOwnerExportsBefore)),
		saveOne:       saveOne,
		saveReleasing: pgSaveReleasing(saveOne),
		upsertLogged:  pgLogged("", pgText(qUpsertWorkspace)),
	}
})

// isNoRows reports whether err says a single-row query found nothing.
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) }

// GetWorkspace returns the workspace with id, tombstones included.
func (s *PGStore) GetWorkspace(ctx context.Context, id string) (core.Workspace, error) {
	ws, err := scanWorkspace(s.pool.QueryRow(ctx, pgText(qGetWorkspace), id))
	if isNoRows(err) {
		return core.Workspace{}, notFound("workspace", id)
	}
	if err != nil {
		return core.Workspace{}, s.wrap("get workspace "+id, err)
	}
	return ws, nil
}

// ListWorkspaces returns every workspace that is not a tombstone, oldest
// change first.
func (s *PGStore) ListWorkspaces(ctx context.Context) ([]core.Workspace, error) {
	rows, err := s.pool.Query(ctx, qListLive)
	if err != nil {
		return nil, s.wrap("list workspaces", err)
	}
	list, err := pgScanAll(rows, scanWorkspace)
	if err != nil {
		return nil, s.wrap("list workspaces", err)
	}
	return list, nil
}

// SaveWorkspace inserts or replaces ws with the next revision, as
// Store.SaveWorkspace does, in one statement (pgSaveOne). The counter row
// stays locked until it commits, so revisions become visible in order on
// every replica and ?since catch-up never skips one.
func (s *PGStore) SaveWorkspace(ctx context.Context, ws core.Workspace) (core.Workspace, error) {
	return s.saveOne(ctx, pgq().saveOne, "save workspace "+ws.ID, ws)
}

// SaveWorkspaces saves many workspaces in one transaction, each with its
// own revision.
func (s *PGStore) SaveWorkspaces(ctx context.Context, list []core.Workspace) error {
	now := s.now().UTC()
	all := make([][]any, len(list))
	for i, ws := range list {
		args, err := workspaceArgsAt(ws, now)
		if err != nil {
			return err
		}
		all[i] = args
	}
	return s.write(ctx, fmt.Sprintf("save %d workspaces", len(list)), func(tx pgx.Tx) error {
		var last int64
		for _, args := range all {
			saved, err := pgSaveWorkspace(ctx, tx, args)
			if err != nil {
				return err
			}
			last = saved.Rev
		}
		if len(all) == 0 {
			return nil
		}
		// One notification for the batch: its last revision covers it.
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, feedChannel, strconv.FormatInt(last, 10))
		return err
	})
}

func pgSaveWorkspace(ctx context.Context, tx pgx.Tx, args []any) (core.Workspace, error) {
	var rev int64
	if err := tx.QueryRow(ctx, qBumpRev).Scan(&rev); err != nil {
		return core.Workspace{}, err
	}
	args[revArg] = rev
	return scanWorkspace(tx.QueryRow(ctx, pgq().upsertLogged, args...))
}

// Changes returns the workspaces changed after since and the current
// revision from one snapshot; see core.Store.
func (s *PGStore) Changes(ctx context.Context, since int64) (changes []core.Workspace, rev int64, complete bool, err error) {
	// Fast path for a replica that is up to date (every lease taken
	// asks): one statement, one round trip, instead of a transaction.
	var floor int64
	if err := s.pool.QueryRow(ctx, qFeedHead).Scan(&rev, &floor); err != nil {
		return nil, 0, false, s.wrap("read changes", err)
	}
	if since == rev && since >= floor {
		return nil, rev, true, nil
	}
	err = s.read(ctx, "read changes", func(tx pgx.Tx) error {
		var floor, logFloor int64
		if err := tx.QueryRow(ctx, qFeedHead).Scan(&rev, &floor); err != nil {
			return err
		}
		if since > rev || since < floor {
			return nil
		}
		if err := tx.QueryRow(ctx, qFeedLogFloor, rev).Scan(&logFloor); err != nil {
			return err
		}
		q := qFeedLogSince // every revision, in order
		if since < logFloor {
			q = pgText(qChangesSince) // the latest revision of each workspace
		}
		rows, err := tx.Query(ctx, q, since)
		if err != nil {
			return err
		}
		changes, err = pgScanAll(rows, scanWorkspace)
		complete = err == nil
		return err
	})
	if err != nil {
		return nil, 0, false, err
	}
	return changes, rev, complete, nil
}

// PruneTombstones deletes old tombstones and raises the floor, in one
// statement, and cuts the feed log's revisions older than feedLogKeepFor.
func (s *PGStore) PruneTombstones(ctx context.Context, cutoff time.Time, keep int) error {
	keep = max(keep, 0)
	return s.write(ctx, "prune tombstones", func(tx pgx.Tx) error {
		if err := pruneFeedLog(ctx, tx, s.now().Add(-feedLogKeepFor)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `WITH gone AS (
			DELETE FROM workspaces WHERE removed_at IS NOT NULL AND (removed_at < $1 OR rev NOT IN (
				SELECT rev FROM workspaces WHERE removed_at IS NOT NULL ORDER BY rev DESC LIMIT $2))
			RETURNING rev)
			UPDATE meta SET value = greatest(value, (SELECT max(rev) FROM gone))
			WHERE key = 'floor' AND EXISTS (SELECT 1 FROM gone)`, nanos(cutoff), keep)
		return err
	})
}

// PutAccount inserts or replaces an account; see Store.PutAccount.
func (s *PGStore) PutAccount(ctx context.Context, a core.Account) error {
	args, err := accountArgs(a)
	if err != nil {
		return err
	}
	return s.write(ctx, "put account "+a.ID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, pgText(qPutAccount), args...)
		return err
	})
}

// GetAccount returns the account with id.
func (s *PGStore) GetAccount(ctx context.Context, id string) (core.Account, error) {
	a, err := scanAccount(s.pool.QueryRow(ctx, pgText(qGetAccount), id))
	if isNoRows(err) {
		return core.Account{}, notFound("account", id)
	}
	if err != nil {
		return core.Account{}, s.wrap("get account "+id, err)
	}
	return a, nil
}

// ListAccounts returns every account of every owner, oldest first.
func (s *PGStore) ListAccounts(ctx context.Context) ([]core.Account, error) {
	// NULLS FIRST and byte order of ids: as SQLite sorts.
	rows, err := s.pool.Query(ctx, `SELECT `+accountCols+` FROM accounts ORDER BY created_at NULLS FIRST, id COLLATE "C"`)
	if err != nil {
		return nil, s.wrap("list accounts", err)
	}
	list, err := pgScanAll(rows, scanAccount)
	if err != nil {
		return nil, s.wrap("list accounts", err)
	}
	return list, nil
}

// DeleteAccount forgets an account (its flag goes with it).
func (s *PGStore) DeleteAccount(ctx context.Context, id string) error {
	return s.execOne(ctx, "delete account "+id, notFound("account", id), `DELETE FROM accounts WHERE id = $1`, id)
}

// execOne runs a statement that must change one row; none is missing.
func (s *PGStore) execOne(ctx context.Context, what string, missing error, q string, args ...any) error {
	return s.write(ctx, what, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, q, args...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return missing
		}
		return nil
	})
}

// PutOp writes a journal entry: inserts when op.ID is 0, else updates.
func (s *PGStore) PutOp(ctx context.Context, op core.Op) (core.Op, error) {
	if op.WorkspaceID == "" || op.Kind == "" {
		return op, core.Errorf(core.KindInvalid, "a journal entry needs a workspace and a kind")
	}
	var e enc
	created, updated := e.time("created_at", op.CreatedAt), e.time("updated_at", op.UpdatedAt)
	dj := e.json("delete_journal", op.Delete, op.Delete == nil)
	if e.err != nil {
		return op, e.err
	}
	what := fmt.Sprintf("journal %s of workspace %s", op.Kind, op.WorkspaceID)
	if op.ID == 0 {
		err := s.write(ctx, what, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, pgText(qInsertOp), op.WorkspaceID, string(op.Kind), op.Step, op.Attempts, op.LastError, created, updated, dj).Scan(&op.ID)
		})
		return op, err
	}
	err := s.execOne(ctx, what, core.Errorf(core.KindNotFound, "journal entry %d not found", op.ID), pgText(qUpdateOp),
		op.WorkspaceID, string(op.Kind), op.Step, op.Attempts, op.LastError, created, updated, dj, op.ID)
	return op, err
}

// DeleteOp closes a journal entry. An unknown id is a KindNotFound error.
func (s *PGStore) DeleteOp(ctx context.Context, id int64) error {
	return s.execOne(ctx, fmt.Sprintf("delete journal entry %d", id),
		core.Errorf(core.KindNotFound, "journal entry %d not found", id), `DELETE FROM ops WHERE id = $1`, id)
}

// pgScanAll reads every row with scan and closes rows (see scanRows).
func pgScanAll[T any](rows pgx.Rows, scan func(scanner) (T, error)) ([]T, error) {
	return scanRows(rows, scan)
}
