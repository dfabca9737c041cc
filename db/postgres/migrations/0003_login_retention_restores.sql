-- 0003: what SQLite's migrations 0006-0009 added, in PostgreSQL's types:
-- restores, retention (policies, claims, warnings), users, sessions and
-- API tokens, accounts.shared and accounts.delete_export, and the delete
-- pipeline's journal payload. Integer booleans stay integers where the Go
-- code shares its scanning with SQLite (accounts.shared, users.admin).

CREATE TABLE restores (
	workspace_id TEXT PRIMARY KEY,
	export_id    TEXT NOT NULL,
	created_at   BIGINT NOT NULL
);

CREATE TABLE retention_policies (
	account_id  TEXT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
	enabled     BOOLEAN NOT NULL,
	paused_for  BIGINT NOT NULL CHECK (paused_for >= 0),
	warn_before BIGINT NOT NULL CHECK (warn_before >= 0),
	storage_price_per_gib_month DOUBLE PRECISION CHECK (storage_price_per_gib_month IS NULL OR storage_price_per_gib_month >= 0),
	updated_at  BIGINT NOT NULL
);

CREATE INDEX workspaces_retention ON workspaces (account_id, delete_after)
	WHERE delete_after IS NOT NULL AND removed_at IS NULL;

-- Claims are taken row by row with SELECT … FOR UPDATE SKIP LOCKED, so two
-- replicas never hold the same one.
CREATE TABLE retention_claims (
	workspace_id TEXT PRIMARY KEY,
	holder       TEXT NOT NULL,
	lease_until  BIGINT NOT NULL,
	attempts     BIGINT NOT NULL,
	launched     BOOLEAN NOT NULL,
	not_before   BIGINT NOT NULL,
	last_error   TEXT NOT NULL
);

CREATE TABLE retention_warnings (
	workspace_id TEXT PRIMARY KEY,
	delete_after BIGINT NOT NULL
);

CREATE TABLE users (
	id            TEXT PRIMARY KEY,
	issuer        TEXT NOT NULL,
	subject       TEXT NOT NULL,
	name          TEXT NOT NULL,
	admin         BIGINT NOT NULL CHECK (admin IN (0, 1)),
	password_hash TEXT NOT NULL,
	created_at    BIGINT NOT NULL,
	UNIQUE (issuer, subject)
);
CREATE INDEX users_name ON users (name);

CREATE TABLE sessions (
	id_hash      TEXT PRIMARY KEY,
	user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	method       TEXT NOT NULL,
	created_at   BIGINT NOT NULL,
	last_seen_at BIGINT NOT NULL,
	expires_at   BIGINT NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE api_tokens (
	id           TEXT PRIMARY KEY,
	token_hash   TEXT NOT NULL UNIQUE,
	user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	label        TEXT NOT NULL,
	created_at   BIGINT NOT NULL,
	expires_at   BIGINT,
	last_used_at BIGINT
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);

ALTER TABLE accounts ADD COLUMN shared BIGINT NOT NULL DEFAULT 0 CHECK (shared IN (0, 1));
ALTER TABLE accounts ADD COLUMN delete_export TEXT NOT NULL DEFAULT 'required'
	CHECK (delete_export IN ('required', 'best_effort'));

ALTER TABLE ops ADD COLUMN delete_journal TEXT;
