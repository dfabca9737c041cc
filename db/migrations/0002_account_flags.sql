-- A flag the reconciler raised on an account (a provider that keeps
-- inventing boxes, say). One per account; it survives restarts so a flagged
-- provider is not given a fresh allowance of adoptions by each start.
CREATE TABLE account_flags (
	account_id TEXT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
	code       TEXT NOT NULL,
	message    TEXT NOT NULL,
	since      INTEGER NOT NULL
) STRICT;
