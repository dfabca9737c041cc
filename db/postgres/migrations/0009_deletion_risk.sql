-- 0009: a workspace's newest verified export and what a provider's own
-- deletion clock means for it (core/deletion.go). As SQLite's 0012.
ALTER TABLE workspaces ADD COLUMN last_export_at BIGINT;
ALTER TABLE workspaces ADD COLUMN last_export_id TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN deletion_clock TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN deletion_due_at BIGINT;
ALTER TABLE workspaces ADD COLUMN at_risk BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE workspaces ADD COLUMN export_by BIGINT;
