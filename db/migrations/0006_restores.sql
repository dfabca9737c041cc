-- 0005: restores. One row per workspace made from an export's snapshot
-- (POST /v1/exports/{id}/restore), written before the journaled restore
-- starts, so a restore interrupted by a crash knows what to restore.
CREATE TABLE restores (
	workspace_id TEXT PRIMARY KEY,
	export_id    TEXT NOT NULL,
	created_at   INTEGER NOT NULL
) STRICT;
