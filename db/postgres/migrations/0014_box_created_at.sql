-- 0014: as SQLite's 0016: when the provider made the workspace's current
-- box, where a "running" deletion clock starts. The feed log keeps
-- workspaces' columns (0012).
ALTER TABLE workspaces ADD COLUMN box_created_at BIGINT;
ALTER TABLE feed_log ADD COLUMN box_created_at BIGINT;
