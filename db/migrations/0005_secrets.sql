-- 0005: the sealed secret store (--secrets sealed), for servers without an
-- OS keyring. sealed is AEAD ciphertext (nonce first) whose associated
-- data binds it to its key and to this database's instance id, so a row
-- copied under another key, or into another data dir, does not open.
-- key_id names the secret key that sealed the row (rotation). Plaintext is
-- never stored.
CREATE TABLE secrets (
	key        TEXT PRIMARY KEY,
	key_id     TEXT NOT NULL,
	sealed     BLOB NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;
