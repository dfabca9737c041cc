package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/canvasapp/companion/core"
)

const (
	qInsertOp = `INSERT INTO ops (workspace_id, kind, step, attempts, last_error, created_at, updated_at, delete_journal)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`
	qUpdateOp = `UPDATE ops SET workspace_id = ?, kind = ?, step = ?, attempts = ?, last_error = ?,
		created_at = ?, updated_at = ?, delete_journal = ? WHERE id = ?`
	qDeleteOp = `DELETE FROM ops WHERE id = ?`
)

// PutOp writes a journal entry: it inserts op when op.ID is 0 and returns
// it with its new ID (IDs are never reused), and otherwise updates the
// entry with that ID, which must exist.
func (s *Store) PutOp(ctx context.Context, op core.Op) (core.Op, error) {
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
	err := s.write(ctx, what, func(t txn) error {
		if op.ID == 0 {
			return t.queryRow(qInsertOp, op.WorkspaceID, string(op.Kind), op.Step, op.Attempts, op.LastError, created, updated, dj).Scan(&op.ID)
		}
		res, err := t.exec(qUpdateOp, op.WorkspaceID, string(op.Kind), op.Step, op.Attempts, op.LastError, created, updated, dj, op.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return core.Errorf(core.KindNotFound, "journal entry %d not found", op.ID)
		}
		return nil
	})
	if err != nil {
		return op, err
	}
	return op, nil
}

// DeleteOp closes a journal entry. An unknown id is a KindNotFound error.
func (s *Store) DeleteOp(ctx context.Context, id int64) error {
	return s.write(ctx, fmt.Sprintf("delete journal entry %d", id), func(t txn) error {
		res, err := t.exec(qDeleteOp, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return core.Errorf(core.KindNotFound, "journal entry %d not found", id)
		}
		return nil
	})
}

// PendingOps returns every open journal entry, oldest (lowest ID) first.
func (s *Store) PendingOps(ctx context.Context) ([]core.Op, error) {
	return pendingOps(ctx, s)
}

// PendingOps: see Store.PendingOps.
func (s *PGStore) PendingOps(ctx context.Context) ([]core.Op, error) {
	return pendingOps(ctx, s)
}

func pendingOps(ctx context.Context, e engine) ([]core.Op, error) {
	r, err := e.rowsOf(ctx, `SELECT `+opCols+` FROM ops ORDER BY id`)
	if err != nil {
		return nil, e.wrapErr("read journal", err)
	}
	ops, err := scanRows(r, scanOp)
	if err != nil {
		return nil, e.wrapErr("read journal", err)
	}
	return ops, nil
}

// opCols are a journal entry's columns, in scanOp's order.
const opCols = `id, workspace_id, kind, step, attempts, last_error, created_at, updated_at, delete_journal`

// scanOp reads one journal entry in opCols' order.
func scanOp(r scanner) (core.Op, error) {
	var (
		op               core.Op
		kind             string
		created, updated sql.NullInt64
		dj               sql.NullString
	)
	if err := r.Scan(&op.ID, &op.WorkspaceID, &kind, &op.Step, &op.Attempts, &op.LastError, &created, &updated, &dj); err != nil {
		return op, err
	}
	if dj.Valid {
		op.Delete = new(core.DeleteJournal)
		if err := json.Unmarshal([]byte(dj.String), op.Delete); err != nil {
			return op, fmt.Errorf("journal entry %d: decode delete_journal: %w", op.ID, err)
		}
	}
	op.Kind = core.OpKind(kind)
	op.CreatedAt, op.UpdatedAt = timeOf(created), timeOf(updated)
	return op, nil
}
