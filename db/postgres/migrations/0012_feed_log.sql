-- 0012: the feed's log of every saved revision of a workspace, kept for a
-- while (db/pg_feed_log.go). workspaces holds one row per workspace, its
-- latest revision; a replica catching up after another wrote a workspace
-- twice would read only the second. Reading this log instead, it applies
-- and streams both. Its columns are workspaces' columns: a migration that
-- adds one to workspaces adds it here too (TestFeedLogColumns checks).
CREATE TABLE feed_log (LIKE workspaces INCLUDING DEFAULTS);
ALTER TABLE feed_log ADD PRIMARY KEY (rev);
