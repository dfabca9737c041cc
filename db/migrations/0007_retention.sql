-- 0005: retention, the scheduled deletion only `companion serve` runs.
--
-- A policy per account; no row means the policy is off. Durations are
-- nanoseconds. The storage price is optional and only feeds the dry run's
-- money figure.
CREATE TABLE retention_policies (
	account_id  TEXT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
	enabled     INTEGER NOT NULL,
	paused_for  INTEGER NOT NULL CHECK (paused_for >= 0),
	warn_before INTEGER NOT NULL CHECK (warn_before >= 0),
	storage_price_per_gib_month REAL CHECK (storage_price_per_gib_month IS NULL OR storage_price_per_gib_month >= 0),
	updated_at  INTEGER NOT NULL
) STRICT;

-- The tick reads due and soon-due workspaces per account through this
-- index; only workspaces a policy applies to carry delete_after, so it
-- stays as small as the set of scheduled workspaces.
CREATE INDEX workspaces_retention ON workspaces (account_id, delete_after)
	WHERE delete_after IS NOT NULL AND removed_at IS NULL;

-- One claim per due workspace: holder and lease_until keep a second
-- process from running the same delete (an expired lease may be taken
-- over); attempts, launched and not_before carry the backoff of deletes
-- that did not remove the workspace.
CREATE TABLE retention_claims (
	workspace_id TEXT PRIMARY KEY,
	holder       TEXT NOT NULL,      -- '' when nobody holds it
	lease_until  INTEGER NOT NULL,
	attempts     INTEGER NOT NULL,
	launched     INTEGER NOT NULL,   -- a delete was started under this claim
	not_before   INTEGER NOT NULL,   -- the claim may not be taken before
	last_error   TEXT NOT NULL
) STRICT;

-- The delete_after each workspace was warned about, so a warning is sent
-- once per workspace per window.
CREATE TABLE retention_warnings (
	workspace_id TEXT PRIMARY KEY,
	delete_after INTEGER NOT NULL
) STRICT;
