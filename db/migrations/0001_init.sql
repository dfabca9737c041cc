-- 0001: the first schema.
--
-- Times are unix nanoseconds (UTC); NULL stands for Go's zero time.
-- Maps and lists are JSON text; NULL stands for a nil map or slice.
-- Owner is the user id in serve mode and '' on the desktop.

PRAGMA application_id = 1131245678;

CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value ANY NOT NULL
) STRICT;

-- rev is the feed's revision counter; floor is the highest revision of a
-- pruned tombstone (changes at or below it can no longer be replayed).
INSERT INTO meta (key, value) VALUES ('rev', 0), ('floor', 0);

CREATE TABLE accounts (
	id          TEXT PRIMARY KEY,
	owner       TEXT NOT NULL DEFAULT '',
	provider    TEXT NOT NULL,
	label       TEXT NOT NULL,
	config      TEXT,            -- JSON object of non-secret settings
	credentials TEXT,            -- JSON array of credential names, never values
	created_at  INTEGER
) STRICT;

CREATE INDEX accounts_owner ON accounts (owner);

-- Workspaces have no foreign key to accounts: a tombstone outlives its
-- account, and core handles a workspace whose account is gone.
CREATE TABLE workspaces (
	id               TEXT PRIMARY KEY,
	owner            TEXT NOT NULL DEFAULT '',
	name             TEXT NOT NULL,
	account_id       TEXT NOT NULL,
	provider         TEXT NOT NULL,
	state            TEXT NOT NULL,
	box_id           TEXT NOT NULL,
	box_url          TEXT NOT NULL,
	adopted          INTEGER NOT NULL,
	idle_pause_after INTEGER NOT NULL,  -- nanoseconds
	paused_ttl       INTEGER NOT NULL,  -- nanoseconds
	options          TEXT,              -- JSON object
	paused_at        INTEGER,
	last_activity_at INTEGER,
	size_bytes       INTEGER,           -- NULL: size unknown
	size_source      TEXT,
	size_at          INTEGER,
	keep             INTEGER NOT NULL,
	delete_after     INTEGER,
	error            TEXT NOT NULL,
	created_at       INTEGER,
	updated_at       INTEGER,
	rev              INTEGER NOT NULL UNIQUE,
	removed_at       INTEGER            -- NULL: live; set: tombstone
) STRICT;

CREATE INDEX workspaces_owner ON workspaces (owner) WHERE removed_at IS NULL;
CREATE INDEX workspaces_tombstones ON workspaces (rev) WHERE removed_at IS NOT NULL;

-- Journal of multi-step actions. No foreign key: core journals a create
-- before the workspace's first save.
CREATE TABLE ops (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	workspace_id TEXT NOT NULL,
	kind         TEXT NOT NULL,
	step         TEXT NOT NULL,
	attempts     INTEGER NOT NULL,
	last_error   TEXT NOT NULL,
	created_at   INTEGER,
	updated_at   INTEGER
) STRICT;

-- Delete previews, single use. A plan dies with its workspace's row.
CREATE TABLE plans (
	token_hash       TEXT PRIMARY KEY,
	workspace_id     TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
	state            TEXT NOT NULL,
	box_id           TEXT NOT NULL,
	last_activity_at INTEGER,
	created_at       INTEGER,
	expires_at       INTEGER NOT NULL
) STRICT;

CREATE INDEX plans_workspace ON plans (workspace_id);
CREATE INDEX plans_expires ON plans (expires_at);

-- Hash pins of installed Wasm provider modules.
CREATE TABLE module_pins (
	name       TEXT PRIMARY KEY,
	sha256     TEXT NOT NULL,
	manifest   BLOB NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;
