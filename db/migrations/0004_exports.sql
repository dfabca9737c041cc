-- 0004: export records. A row is written 'running' before anything is
-- captured and becomes 'verified' only after the export's read-back
-- matched; a start-up turns rows a crash left 'running' into 'failed'.
-- files is a JSON list of core.ExportFile (name, kind, format, bytes,
-- sha256); archive_sha256 is the full (tar.gz) archive's.
CREATE TABLE exports (
	id             TEXT PRIMARY KEY,
	workspace_id   TEXT NOT NULL,
	owner          TEXT NOT NULL,
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL,
	state          TEXT NOT NULL CHECK (state IN ('running', 'verified', 'failed')),
	dir            TEXT NOT NULL,
	files          TEXT NOT NULL,
	bytes          INTEGER NOT NULL,
	archive_sha256 TEXT NOT NULL,
	verified       INTEGER NOT NULL CHECK (verified = (state = 'verified')),
	error          TEXT NOT NULL
) STRICT;

CREATE INDEX exports_workspace ON exports (workspace_id, created_at);
CREATE INDEX exports_running ON exports (state) WHERE state = 'running';
