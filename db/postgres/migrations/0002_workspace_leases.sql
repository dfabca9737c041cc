-- 0002: per-workspace leases, the lock an action holds across every
-- companion sharing this database. A lease lapses at expires_at (database
-- time, so replicas' clocks do not matter): a replica that died holding
-- one blocks its workspace only until then. The holder renews it while the
-- action runs.
CREATE TABLE workspace_leases (
	workspace_id TEXT PRIMARY KEY,
	holder       TEXT NOT NULL,
	expires_at   TIMESTAMPTZ NOT NULL
);
