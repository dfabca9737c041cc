package db

import (
	"context"
	"database/sql"
	"errors"

	"github.com/canvasapp/companion/core"
)

const (
	qPutRestore = `INSERT INTO restores (workspace_id, export_id, created_at, method) VALUES (?, ?, ?, ?)
		ON CONFLICT (workspace_id) DO UPDATE SET export_id = excluded.export_id, method = excluded.method`
	qGetRestore = `SELECT workspace_id, export_id, created_at, method FROM restores WHERE workspace_id = ?`
)

var _ core.RestoreStore = (*Store)(nil)

// PutRestore records which export a workspace is restored from.
func (s *Store) PutRestore(ctx context.Context, r core.RestoreRecord) error {
	if r.WorkspaceID == "" || r.ExportID == "" || r.CreatedAt.IsZero() {
		return core.Errorf(core.KindInvalid, "a restore record needs a workspace, an export and a time")
	}
	return s.write(ctx, "put restore of "+r.WorkspaceID, func(t txn) error {
		_, err := t.exec(qPutRestore, r.WorkspaceID, r.ExportID, nanos(r.CreatedAt), r.Method)
		return err
	})
}

// GetRestore returns the restore record of a workspace.
func (s *Store) GetRestore(ctx context.Context, workspaceID string) (core.RestoreRecord, error) {
	var r core.RestoreRecord
	err := s.read(ctx, "get restore of "+workspaceID, func(t txn) error {
		var created sql.NullInt64
		err := t.queryRow(qGetRestore, workspaceID).Scan(&r.WorkspaceID, &r.ExportID, &created, &r.Method)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("restore of workspace", workspaceID)
		}
		r.CreatedAt = timeOf(created)
		return err
	})
	return r, err
}
