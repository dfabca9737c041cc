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
	rows, err := s.reads().query(ctx, `SELECT id, workspace_id, kind, step, attempts, last_error, created_at, updated_at, delete_journal
		FROM ops ORDER BY id`)
	if err != nil {
		return nil, wrap("read journal", err)
	}
	defer rows.Close()
	var ops []core.Op
	for rows.Next() {
		var (
			op               core.Op
			kind             string
			created, updated sql.NullInt64
			dj               sql.NullString
		)
		if err := rows.Scan(&op.ID, &op.WorkspaceID, &kind, &op.Step, &op.Attempts, &op.LastError, &created, &updated, &dj); err != nil {
			return nil, wrap("read journal", err)
		}
		if dj.Valid {
			op.Delete = new(core.DeleteJournal)
			if err := json.Unmarshal([]byte(dj.String), op.Delete); err != nil {
				return nil, wrap(fmt.Sprintf("read journal entry %d", op.ID), fmt.Errorf("decode delete_journal: %w", err))
			}
		}
		op.Kind = core.OpKind(kind)
		op.CreatedAt, op.UpdatedAt = timeOf(created), timeOf(updated)
		ops = append(ops, op)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("read journal", err)
	}
	return ops, nil
}
