-- 0010: export retention, as SQLite's 0013: 'expiring' and 'expired'
-- export records, the index a policy walks, and how long an account
-- keeps its exports (0: for ever).
ALTER TABLE exports DROP CONSTRAINT exports_state_check;
ALTER TABLE exports ADD CONSTRAINT exports_state_check
	CHECK (state IN ('running', 'verified', 'failed', 'expiring', 'expired'));
CREATE INDEX exports_expiry ON exports (account_id, created_at) WHERE state = 'verified';
CREATE INDEX exports_expiring ON exports (account_id) WHERE state = 'expiring';

ALTER TABLE retention_policies ADD COLUMN exports_kept_for BIGINT NOT NULL DEFAULT 0 CHECK (exports_kept_for >= 0);
