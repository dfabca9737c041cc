-- The schema and rows that migrations 0001 to 0017 leave in a new
-- database, as one script (see schema.go). Generated: do not edit; run
-- go test ./db -run TestSchemaSnapshot -update

PRAGMA application_id = 1131245678;

CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value ANY NOT NULL
) STRICT;

CREATE TABLE accounts (
	id          TEXT PRIMARY KEY,
	owner       TEXT NOT NULL DEFAULT '',
	provider    TEXT NOT NULL,
	label       TEXT NOT NULL,
	config      TEXT,            -- JSON object of non-secret settings
	credentials TEXT,            -- JSON array of credential names, never values
	created_at  INTEGER
, shared INTEGER NOT NULL DEFAULT 0 CHECK (shared IN (0, 1)), delete_export TEXT NOT NULL DEFAULT 'required'
	CHECK (delete_export IN ('required', 'best_effort'))) STRICT;

CREATE INDEX accounts_owner ON accounts (owner);

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
, stop_reason TEXT NOT NULL DEFAULT '', exit_code INTEGER, last_export_at INTEGER, last_export_id TEXT NOT NULL DEFAULT '', deletion_clock TEXT NOT NULL DEFAULT '', deletion_due_at INTEGER, at_risk INTEGER NOT NULL DEFAULT 0 CHECK (at_risk IN (0, 1)), export_by INTEGER, box_created_at INTEGER) STRICT;

CREATE INDEX workspaces_owner ON workspaces (owner) WHERE removed_at IS NULL;

CREATE INDEX workspaces_tombstones ON workspaces (rev) WHERE removed_at IS NOT NULL;

CREATE TABLE ops (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	workspace_id TEXT NOT NULL,
	kind         TEXT NOT NULL,
	step         TEXT NOT NULL,
	attempts     INTEGER NOT NULL,
	last_error   TEXT NOT NULL,
	created_at   INTEGER,
	updated_at   INTEGER
, delete_journal TEXT) STRICT;

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

CREATE TABLE module_pins (
	name       TEXT PRIMARY KEY,
	sha256     TEXT NOT NULL,
	manifest   BLOB NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE account_flags (
	account_id TEXT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
	code       TEXT NOT NULL,
	message    TEXT NOT NULL,
	since      INTEGER NOT NULL
) STRICT;

CREATE TABLE audit (
	id            INTEGER PRIMARY KEY,
	at            INTEGER NOT NULL,
	owner         TEXT NOT NULL,
	actor         TEXT NOT NULL,
	action        TEXT NOT NULL,
	workspace_id  TEXT NOT NULL,
	account_id    TEXT NOT NULL,
	provider      TEXT NOT NULL,
	outcome       TEXT NOT NULL,
	export_sha256 TEXT NOT NULL,
	prev_hash     TEXT NOT NULL,
	hash          TEXT NOT NULL
) STRICT;

CREATE INDEX audit_owner ON audit (owner, id);

CREATE TABLE secrets (
	key        TEXT PRIMARY KEY,
	key_id     TEXT NOT NULL,
	sealed     BLOB NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE restores (
	workspace_id TEXT PRIMARY KEY,
	export_id    TEXT NOT NULL,
	created_at   INTEGER NOT NULL
, method TEXT NOT NULL DEFAULT '') STRICT;

CREATE TABLE retention_policies (
	account_id  TEXT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
	enabled     INTEGER NOT NULL,
	paused_for  INTEGER NOT NULL CHECK (paused_for >= 0),
	warn_before INTEGER NOT NULL CHECK (warn_before >= 0),
	storage_price_per_gib_month REAL CHECK (storage_price_per_gib_month IS NULL OR storage_price_per_gib_month >= 0),
	updated_at  INTEGER NOT NULL
, exports_kept_for INTEGER NOT NULL DEFAULT 0 CHECK (exports_kept_for >= 0)) STRICT;

CREATE INDEX workspaces_retention ON workspaces (account_id, delete_after)
	WHERE delete_after IS NOT NULL AND removed_at IS NULL;

CREATE TABLE retention_claims (
	workspace_id TEXT PRIMARY KEY,
	holder       TEXT NOT NULL,      -- '' when nobody holds it
	lease_until  INTEGER NOT NULL,
	attempts     INTEGER NOT NULL,
	launched     INTEGER NOT NULL,   -- a delete was started under this claim
	not_before   INTEGER NOT NULL,   -- the claim may not be taken before
	last_error   TEXT NOT NULL
) STRICT;

CREATE TABLE retention_warnings (
	workspace_id TEXT PRIMARY KEY,
	delete_after INTEGER NOT NULL
) STRICT;

CREATE TABLE users (
	id            TEXT PRIMARY KEY,
	issuer        TEXT NOT NULL,
	subject       TEXT NOT NULL,
	name          TEXT NOT NULL,
	admin         INTEGER NOT NULL CHECK (admin IN (0, 1)),
	password_hash TEXT NOT NULL,     -- PHC string with its argon2id parameters; '' for no password
	created_at    INTEGER NOT NULL,
	UNIQUE (issuer, subject)
) STRICT;

CREATE INDEX users_name ON users (name);

CREATE TABLE sessions (
	id_hash      TEXT PRIMARY KEY,
	user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	method       TEXT NOT NULL,      -- 'local', 'proxy', …: how the user signed in
	created_at   INTEGER NOT NULL,
	last_seen_at INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL    -- absolute expiry
) STRICT;

CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE api_tokens (
	id           TEXT PRIMARY KEY,
	token_hash   TEXT NOT NULL UNIQUE,
	user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	label        TEXT NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER,            -- NULL: never
	last_used_at INTEGER
, scope TEXT NOT NULL DEFAULT '') STRICT;

CREATE INDEX api_tokens_user ON api_tokens (user_id);

CREATE TABLE login_failures (
	key     TEXT PRIMARY KEY,
	ends_at INTEGER NOT NULL,
	n       INTEGER NOT NULL
);

CREATE INDEX login_failures_ends ON login_failures (ends_at);

CREATE TABLE login_known (
	key   TEXT PRIMARY KEY,
	until INTEGER NOT NULL
);

CREATE INDEX login_known_until ON login_known (until);

CREATE TABLE "exports" (
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

CREATE INDEX exports_workspace ON exports (workspace_id, created_at);

CREATE INDEX exports_running ON exports (state) WHERE state = 'running';

CREATE INDEX exports_owner ON exports (owner, created_at);

CREATE INDEX exports_expiry ON exports (account_id, created_at) WHERE state = 'verified';

CREATE INDEX exports_expiring ON exports (account_id) WHERE state = 'expiring';

CREATE TABLE webhooks (
	id         TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	account_id TEXT NOT NULL DEFAULT '',
	url        TEXT NOT NULL,
	events     TEXT NOT NULL,
	created_at INTEGER NOT NULL
, previous_secret_until INTEGER) STRICT;

CREATE INDEX webhooks_owner ON webhooks (owner);

CREATE INDEX webhooks_account ON webhooks (account_id) WHERE account_id <> '';

CREATE TABLE webhook_deliveries (
	id           TEXT PRIMARY KEY,
	webhook_id   TEXT NOT NULL,
	event_id     TEXT NOT NULL,
	event        TEXT NOT NULL,
	payload      TEXT NOT NULL,
	created_at   INTEGER NOT NULL,
	state        TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
	attempts     INTEGER NOT NULL DEFAULT 0,
	next_at      INTEGER NOT NULL,
	holder       TEXT NOT NULL DEFAULT '',
	lease_until  INTEGER NOT NULL DEFAULT 0,
	last_status  INTEGER NOT NULL DEFAULT 0,
	last_error   TEXT NOT NULL DEFAULT '',
	delivered_at INTEGER,
	UNIQUE (webhook_id, event_id)
) STRICT;

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';

CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, created_at);

CREATE INDEX webhook_deliveries_done ON webhook_deliveries (created_at) WHERE state <> 'pending';

INSERT INTO meta (key, value) VALUES ('audit_head', 0);
INSERT INTO meta (key, value) VALUES ('floor', 0);
INSERT INTO meta (key, value) VALUES ('rev', 0);
