-- 0013: webhooks, as SQLite's 0015 (webhooks/). A webhook belongs to a user (owner) and
-- hears of every one of their workspaces and accounts, or of one account
-- (account_id). Its signing secret is in the secret store, never here.
-- webhook_deliveries is the outbox: one row per event and webhook, written
-- when the event is; a sender claims due rows with a lease (holder,
-- lease_until) so two processes never send the same one at once.
CREATE TABLE webhooks (
	id         TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	account_id TEXT NOT NULL DEFAULT '',
	url        TEXT NOT NULL,
	events     TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX webhooks_owner ON webhooks (owner);
CREATE INDEX webhooks_account ON webhooks (account_id) WHERE account_id <> '';

CREATE TABLE webhook_deliveries (
	id           TEXT PRIMARY KEY,
	webhook_id   TEXT NOT NULL,
	event_id     TEXT NOT NULL,
	event        TEXT NOT NULL,
	payload      TEXT NOT NULL,
	created_at   BIGINT NOT NULL,
	state        TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
	attempts     BIGINT NOT NULL DEFAULT 0,
	next_at      BIGINT NOT NULL,
	holder       TEXT NOT NULL DEFAULT '',
	lease_until  BIGINT NOT NULL DEFAULT 0,
	last_status  BIGINT NOT NULL DEFAULT 0,
	last_error   TEXT NOT NULL DEFAULT '',
	delivered_at BIGINT,
	UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, created_at);
-- Delivered and failed rows are pruned after a while, oldest first.
CREATE INDEX webhook_deliveries_done ON webhook_deliveries (created_at) WHERE state <> 'pending';
