-- 0013: export retention (core/export_expiry.go). An account's policy may
-- remove its old exports' files: a record is 'expiring' while they are
-- removed (the next tick finishes a removal a restart cut short) and
-- 'expired' after, and stays as history. SQLite cannot change a CHECK, so
-- exports is rebuilt; nothing references it.
CREATE TABLE exports_next (
	id             TEXT PRIMARY KEY,
	workspace_id   TEXT NOT NULL,
	owner          TEXT NOT NULL,
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL,
	state          TEXT NOT NULL CHECK (state IN ('running', 'verified', 'failed', 'expiring', 'expired')),
	dir            TEXT NOT NULL,
	files          TEXT NOT NULL,
	bytes          INTEGER NOT NULL,
	archive_sha256 TEXT NOT NULL,
	verified       INTEGER NOT NULL CHECK (verified = (state = 'verified')),
	error          TEXT NOT NULL,
	workspace_name TEXT NOT NULL DEFAULT '',
	provider       TEXT NOT NULL DEFAULT '',
	account_id     TEXT NOT NULL DEFAULT ''
) STRICT;
INSERT INTO exports_next (id, workspace_id, owner, created_at, updated_at, state, dir, files, bytes, archive_sha256,
		verified, error, workspace_name, provider, account_id)
	SELECT id, workspace_id, owner, created_at, updated_at, state, dir, files, bytes, archive_sha256,
		verified, error, workspace_name, provider, account_id FROM exports;
DROP TABLE exports;
ALTER TABLE exports_next RENAME TO exports;
CREATE INDEX exports_workspace ON exports (workspace_id, created_at);
CREATE INDEX exports_running ON exports (state) WHERE state = 'running';
CREATE INDEX exports_owner ON exports (owner, created_at);
-- What a policy may expire, oldest first, per account; and removals a
-- restart cut short.
CREATE INDEX exports_expiry ON exports (account_id, created_at) WHERE state = 'verified';
CREATE INDEX exports_expiring ON exports (account_id) WHERE state = 'expiring';

-- How long the account keeps its exports; 0: for ever.
ALTER TABLE retention_policies ADD COLUMN exports_kept_for INTEGER NOT NULL DEFAULT 0 CHECK (exports_kept_for >= 0);
