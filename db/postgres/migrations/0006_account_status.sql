-- 0006: the reconciler's last word on each account, shared. Only the
-- replica holding an account's lease lists it; the others show the status
-- it wrote here instead of "checking" for ever. Rebuilt by the next pass,
-- so it is not copied by migrate sqlite-to-postgres.
CREATE TABLE account_status (
	account_id      TEXT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
	state           TEXT NOT NULL,
	kind            TEXT NOT NULL DEFAULT '',
	message         TEXT NOT NULL DEFAULT '',
	last_ok_at      TIMESTAMPTZ,
	next_attempt_at TIMESTAMPTZ
);
