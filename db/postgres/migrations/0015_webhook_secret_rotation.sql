-- 0015: as SQLite's 0017: until previous_secret_until (unix ns) a
-- webhook's deliveries are signed with its previous secret too (kept in
-- the secret store, never here); NULL: there is none.
ALTER TABLE webhooks ADD COLUMN previous_secret_until BIGINT;
