-- 0012: what a provider's own deletion clock means for a workspace
-- (core/deletion.go): its newest verified export, the clock that deletes
-- it first, when, and whether that clock runs with no export made since it
-- started, and (serve) when its guard exports it. Derived on every save,
-- except the export, which is set when one verifies.
ALTER TABLE workspaces ADD COLUMN last_export_at INTEGER;
ALTER TABLE workspaces ADD COLUMN last_export_id TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN deletion_clock TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN deletion_due_at INTEGER;
ALTER TABLE workspaces ADD COLUMN at_risk INTEGER NOT NULL DEFAULT 0 CHECK (at_risk IN (0, 1));
ALTER TABLE workspaces ADD COLUMN export_by INTEGER;
