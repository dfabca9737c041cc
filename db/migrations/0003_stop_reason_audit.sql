-- 0003: why a box stopped, and the hash-chained audit trail.

-- stop_reason is core.StopReason ('' while running or unknown); exit_code
-- is the stopped box's exit status, NULL when not reported.
ALTER TABLE workspaces ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN exit_code INTEGER;

-- Append-only. hash = SHA-256 of prev_hash and the row's canonical content
-- (core.AuditContent); id is the chain order. meta 'audit_head' holds the
-- newest id so a truncated tail is noticed too.
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

INSERT INTO meta (key, value) VALUES ('audit_head', 0);
