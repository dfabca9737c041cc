-- 0011: an API token's scope: '' is everything its user may do, 'metrics'
-- reading GET /metrics only.
ALTER TABLE api_tokens ADD COLUMN scope TEXT NOT NULL DEFAULT '';
