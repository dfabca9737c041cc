-- 0016: when the provider made the workspace's current box (unix ns). A
-- provider whose every resume makes a new box (Modal) ends each box a
-- fixed time after that: the "running" deletion clock starts there.
ALTER TABLE workspaces ADD COLUMN box_created_at INTEGER;
