-- 0017: a webhook's secret rotation (webhooks/rotate.go). Until
-- previous_secret_until (unix ns) deliveries are signed with the previous
-- secret too, which is in the secret store under its own key, never here;
-- NULL: there is none.
ALTER TABLE webhooks ADD COLUMN previous_secret_until INTEGER;
