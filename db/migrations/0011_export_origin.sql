-- 0011: what an export was of, kept on the export itself: the workspace's
-- name, provider and account, since a deleted workspace's row (its
-- tombstone) is pruned while its exports stay ("Deleted workspaces"); and
-- an index to list one owner's exports. A restore records its method
-- ('' for rows written before methods existed: a snapshot restore).
ALTER TABLE exports ADD COLUMN workspace_name TEXT NOT NULL DEFAULT '';
ALTER TABLE exports ADD COLUMN provider TEXT NOT NULL DEFAULT '';
ALTER TABLE exports ADD COLUMN account_id TEXT NOT NULL DEFAULT '';
CREATE INDEX exports_owner ON exports (owner, created_at);

ALTER TABLE restores ADD COLUMN method TEXT NOT NULL DEFAULT '';
