package db

import (
	"context"
	"database/sql"

	"github.com/canvasapp/companion/core"

	"github.com/jackc/pgx/v5"
)

var _ core.RestoreStore = (*PGStore)(nil)

// PutRestore records which export a workspace is restored from.
func (s *PGStore) PutRestore(ctx context.Context, r core.RestoreRecord) error {
	if r.WorkspaceID == "" || r.ExportID == "" || r.CreatedAt.IsZero() {
		return core.Errorf(core.KindInvalid, "a restore record needs a workspace, an export and a time")
	}
	return s.write(ctx, "put restore of "+r.WorkspaceID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, pgSQL(qPutRestore), r.WorkspaceID, r.ExportID, nanos(r.CreatedAt), r.Method)
		return err
	})
}

// GetRestore returns the restore record of a workspace.
func (s *PGStore) GetRestore(ctx context.Context, workspaceID string) (core.RestoreRecord, error) {
	var (
		r       core.RestoreRecord
		created sql.NullInt64
	)
	err := s.pool.QueryRow(ctx, pgSQL(qGetRestore), workspaceID).Scan(&r.WorkspaceID, &r.ExportID, &created, &r.Method)
	if isNoRows(err) {
		return r, notFound("restore of workspace", workspaceID)
	}
	if err != nil {
		return r, s.wrap("get restore of "+workspaceID, err)
	}
	r.CreatedAt = timeOf(created)
	return r, nil
}
