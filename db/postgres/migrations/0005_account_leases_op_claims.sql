-- 0005: what several replicas need so that none acts twice.
--
-- account_leases: the reconciler's lease per provider account, so one
-- replica lists an account at a time (a provider's rate limit is not
-- multiplied by the number of replicas). Like workspace_leases, it lapses
-- at expires_at in database time.
CREATE TABLE account_leases (
	account_id TEXT PRIMARY KEY,
	holder     TEXT NOT NULL,
	expires_at TIMESTAMPTZ NOT NULL
);

-- A journal entry's claim: the replica running it and until when. A
-- claim that lapsed (its replica died) is taken over by another replica's
-- recovery pass, row by row with FOR UPDATE SKIP LOCKED. NULL: never
-- claimed (an entry copied from SQLite, or one whose launch has not
-- claimed it yet; the workspace's lease covers that moment).
ALTER TABLE ops ADD COLUMN claim_holder TEXT NOT NULL DEFAULT '';
ALTER TABLE ops ADD COLUMN claim_until TIMESTAMPTZ;
CREATE INDEX ops_claim ON ops (claim_until);
