-- 0005: users, login sessions and personal API tokens (serve mode).
--
-- A user is keyed by (issuer, subject): local users have issuer 'local'
-- and their name as subject; users first seen through a trusted ingress
-- have issuer 'proxy'; an OpenID Connect login will add its issuer URL.
-- id is what every owner column elsewhere holds.
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

-- Sessions store only the SHA-256 of the id the cookie carries, so a copy
-- of the database does not let anyone sign in.
CREATE TABLE sessions (
	id_hash      TEXT PRIMARY KEY,
	user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	method       TEXT NOT NULL,      -- 'local', 'proxy', …: how the user signed in
	created_at   INTEGER NOT NULL,
	last_seen_at INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL    -- absolute expiry
) STRICT;

CREATE INDEX sessions_user ON sessions (user_id);

-- Personal API tokens, stored as SHA-256 too; shown once at creation.
CREATE TABLE api_tokens (
	id           TEXT PRIMARY KEY,
	token_hash   TEXT NOT NULL UNIQUE,
	user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	label        TEXT NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER,            -- NULL: never
	last_used_at INTEGER
) STRICT;

CREATE INDEX api_tokens_user ON api_tokens (user_id);

-- A shared account (serve mode's built-in Docker account) is usable by
-- every user; its workspaces belong to whoever made them.
ALTER TABLE accounts ADD COLUMN shared INTEGER NOT NULL DEFAULT 0 CHECK (shared IN (0, 1));
