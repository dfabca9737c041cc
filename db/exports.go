package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/canvasapp/companion/core"
)

const (
	exportCols = `id, workspace_id, owner, created_at, updated_at, state, dir, files, bytes, archive_sha256, verified, error, workspace_name, provider, account_id`
	qPutExport = `INSERT INTO exports (` + exportCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at, state = excluded.state, dir = excluded.dir,
		files = excluded.files, bytes = excluded.bytes, archive_sha256 = excluded.archive_sha256,
		verified = excluded.verified, error = excluded.error`
	qGetExport   = `SELECT ` + exportCols + ` FROM exports WHERE id = ?`
	qListExports = `SELECT ` + exportCols + ` FROM exports WHERE workspace_id = ? ORDER BY created_at DESC, id DESC`
	// Every running record, on the exports_running index.
	qUnfinishedExports = `SELECT ` + exportCols + ` FROM exports WHERE state = 'running' ORDER BY created_at, id`
	qGiveExports       = `UPDATE exports SET owner = ? WHERE workspace_id = ? AND owner = ?`

	// One owner's records, newest first, on the exports_owner index
	// (owner, created_at): the first page, and the page older than a
	// record (its created_at and id, read by qExportCursor). The
	// created_at <= bound is what lets the index range start at the
	// cursor; the OR breaks ties between records made in the same
	// nanosecond by id, like the ORDER BY.
	qOwnerExports       = `SELECT ` + exportCols + ` FROM exports WHERE owner = ? ORDER BY created_at DESC, id DESC LIMIT ?`
	qOwnerExportsBefore = `SELECT ` + exportCols + ` FROM exports WHERE owner = ? AND created_at <= ? AND (created_at < ? OR id < ?)
		ORDER BY created_at DESC, id DESC LIMIT ?`
	qExportCursor = `SELECT created_at FROM exports WHERE id = ? AND owner = ?`

	// What an account's export retention acts on (exports_expiring and
	// exports_expiry): removals a restart cut short, then verified
	// exports made at or before a time, oldest first.
	qExportsExpiring = `SELECT ` + exportCols + ` FROM exports WHERE account_id = ? AND state = 'expiring' ORDER BY created_at, id LIMIT ?`
	qExportsToExpire = `SELECT ` + exportCols + ` FROM exports WHERE account_id = ? AND state = 'verified' AND created_at <= ?
		ORDER BY created_at, id LIMIT ?`
)

// PutExport inserts or updates an export record. A verified record must
// say where its files are and list them; the schema also refuses a
// verified flag on any state but verified.
func (s *Store) PutExport(ctx context.Context, e core.ExportRecord) error {
	args, err := exportArgs(e)
	if err != nil {
		return err
	}
	return s.write(ctx, "put export "+e.ID, func(t txn) error {
		_, err := t.exec(qPutExport, args...)
		return err
	})
}

// exportArgs checks e and returns its columns for qPutExport.
func exportArgs(e core.ExportRecord) ([]any, error) {
	switch {
	case e.ID == "" || e.WorkspaceID == "":
		return nil, core.Errorf(core.KindInvalid, "an export record needs an id and a workspace")
	case !slices.Contains([]string{core.ExportRunning, core.ExportVerified, core.ExportFailed, core.ExportExpiring, core.ExportExpired}, e.State):
		return nil, core.Errorf(core.KindInvalid, "export %s: unknown state %q", e.ID, e.State)
	case e.Verified != (e.State == core.ExportVerified):
		return nil, core.Errorf(core.KindInvalid, "export %s: verified must be set exactly when the state is verified", e.ID)
	case e.Verified && (e.Dir == "" || len(e.Files) == 0):
		return nil, core.Errorf(core.KindInvalid, "export %s: a verified export needs its directory and files", e.ID)
	}
	files := e.Files
	if files == nil {
		files = []core.ExportFile{}
	}
	var en enc
	args := []any{e.ID, e.WorkspaceID, e.Owner, en.time("created_at", e.CreatedAt), en.time("updated_at", e.UpdatedAt),
		e.State, e.Dir, en.json("files", files, false), e.Bytes, e.ArchiveSHA256, e.Verified, e.Error,
		e.WorkspaceName, e.Provider, e.AccountID}
	if en.err != nil {
		return nil, en.err
	}
	if args[3] == nil || args[4] == nil {
		return nil, core.Errorf(core.KindInvalid, "export %s needs its created and updated times", e.ID)
	}
	return args, nil
}

// GetExport returns one export record.
func (s *Store) GetExport(ctx context.Context, id string) (core.ExportRecord, error) {
	var e core.ExportRecord
	err := s.read(ctx, "get export "+id, func(t txn) error {
		var err error
		e, err = scanExport(t.queryRow(qGetExport, id))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("export", id)
		}
		return err
	})
	return e, err
}

// ListExports returns a workspace's export records, newest first.
func (s *Store) ListExports(ctx context.Context, workspaceID string) ([]core.ExportRecord, error) {
	out := []core.ExportRecord{}
	err := s.read(ctx, "list exports of "+workspaceID, func(t txn) error {
		rows, err := t.query(qListExports, workspaceID)
		if err != nil {
			return err
		}
		out, err = scanExports(rows)
		return err
	})
	return out, err
}

// ListOwnerExports returns owner's export records newest first
// (created_at, then id, descending), at most limit of them: from the
// newest when before is "", else those older than the record before
// names, which must be one of owner's.
func (s *Store) ListOwnerExports(ctx context.Context, owner, before string, limit int) ([]core.ExportRecord, error) {
	if err := checkOwnerPage(limit); err != nil {
		return nil, err
	}
	out := []core.ExportRecord{}
	err := s.read(ctx, "list the exports of "+owner, func(t txn) error {
		var rows *sql.Rows
		var err error
		if before == "" {
			rows, err = t.query(qOwnerExports, owner, limit)
		} else {
			var at int64
			if err := t.queryRow(qExportCursor, before, owner).Scan(&at); errors.Is(err, sql.ErrNoRows) {
				return badCursor(before)
			} else if err != nil {
				return err
			}
			rows, err = t.query(qOwnerExportsBefore, owner, at, at, before, limit)
		}
		if err != nil {
			return err
		}
		out, err = scanExports(rows)
		return err
	})
	return out, err
}

// ExportsToExpire returns the account's expiring exports, then its
// verified ones made at or before madeBefore, oldest first: at most limit
// in all.
func (s *Store) ExportsToExpire(ctx context.Context, accountID string, madeBefore time.Time, limit int) ([]core.ExportRecord, error) {
	out := []core.ExportRecord{}
	err := s.read(ctx, "list the exports to expire of account "+accountID, func(t txn) error {
		for _, q := range expiryQueries(accountID, madeBefore) {
			if len(out) >= limit {
				return nil
			}
			rows, err := t.query(q.sql, append(q.args, limit-len(out))...)
			if err != nil {
				return err
			}
			got, err := scanExports(rows)
			if err != nil {
				return err
			}
			out = append(out, got...)
		}
		return nil
	})
	return out, err
}

// expiryQuery is one of ExportsToExpire's queries, without its limit.
type expiryQuery struct {
	sql  string
	args []any
}

// expiryQueries are ExportsToExpire's queries in order (both engines).
func expiryQueries(accountID string, madeBefore time.Time) []expiryQuery {
	return []expiryQuery{{qExportsExpiring, []any{accountID}}, {qExportsToExpire, []any{accountID, nanos(madeBefore)}}}
}

// checkOwnerPage refuses a page size ListOwnerExports cannot serve.
func checkOwnerPage(limit int) error {
	if limit <= 0 {
		return core.Errorf(core.KindInvalid, "a page of exports needs a positive limit, not %d", limit)
	}
	return nil
}

// badCursor is the error of a before that names none of the owner's
// exports (exports are never removed, so a cursor this store gave stays
// good).
func badCursor(before string) error {
	return core.Errorf(core.KindInvalid, "before %q is not one of your exports: start from the newest (no before) and pass on the next_before each page gives", before)
}

// UnfinishedExports returns every running export record, oldest first.
func (s *Store) UnfinishedExports(ctx context.Context) ([]core.ExportRecord, error) {
	out := []core.ExportRecord{}
	err := s.read(ctx, "list unfinished exports", func(t txn) error {
		rows, err := t.query(qUnfinishedExports)
		if err != nil {
			return err
		}
		out, err = scanExports(rows)
		return err
	})
	return out, err
}

// GiveExports changes the owner of a workspace's export records owned by
// from to to, and returns how many changed. PutExport never changes an
// owner; this is the one statement that does.
func (s *Store) GiveExports(ctx context.Context, workspaceID, from, to string) (int, error) {
	var n int64
	err := s.write(ctx, "give the exports of "+workspaceID, func(t txn) error {
		res, err := t.exec(qGiveExports, to, workspaceID, from)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// scanExports reads every row of rows and closes them.
func scanExports(rows *sql.Rows) ([]core.ExportRecord, error) {
	defer rows.Close()
	out := []core.ExportRecord{}
	for rows.Next() {
		e, err := scanExport(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func scanExport(r scanner) (core.ExportRecord, error) {
	var (
		e                core.ExportRecord
		created, updated sql.NullInt64
		files            string
	)
	err := r.Scan(&e.ID, &e.WorkspaceID, &e.Owner, &created, &updated, &e.State, &e.Dir, &files, &e.Bytes,
		&e.ArchiveSHA256, &e.Verified, &e.Error, &e.WorkspaceName, &e.Provider, &e.AccountID)
	if err != nil {
		return e, err
	}
	e.CreatedAt, e.UpdatedAt = timeOf(created), timeOf(updated)
	e.Files = []core.ExportFile{}
	if err := json.Unmarshal([]byte(files), &e.Files); err != nil {
		return e, fmt.Errorf("decode files of export %s: %w", e.ID, err)
	}
	return e, nil
}
