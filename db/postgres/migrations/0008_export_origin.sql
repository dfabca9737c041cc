-- 0008: what an export was of (workspace name, provider, account), kept
-- on the export since a deleted workspace's tombstone is pruned while its
-- exports stay; an index to list one owner's exports; a restore's method
-- ('' for rows written before methods existed: a snapshot restore). As
-- SQLite's 0011.
ALTER TABLE exports ADD COLUMN workspace_name TEXT NOT NULL DEFAULT '';
ALTER TABLE exports ADD COLUMN provider TEXT NOT NULL DEFAULT '';
ALTER TABLE exports ADD COLUMN account_id TEXT NOT NULL DEFAULT '';
CREATE INDEX exports_owner ON exports (owner, created_at);

ALTER TABLE restores ADD COLUMN method TEXT NOT NULL DEFAULT '';
