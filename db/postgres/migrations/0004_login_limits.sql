-- 0004: failed-login limits in the database, so they survive a restart
-- (and hold across replicas); the same tables as SQLite's 0010.
--
-- login_failures: one fixed window per key ("ua|user|addr", "a|addr",
-- "u|user"), counting failures until ends_at. login_known: a (user,
-- address) that signed in, known until `until`. Rows past their end are
-- pruned a bounded batch at a time, by the ends_at/until indexes.
CREATE TABLE login_failures (
	key     TEXT PRIMARY KEY,
	ends_at BIGINT NOT NULL,
	n       BIGINT NOT NULL
);
CREATE INDEX login_failures_ends ON login_failures (ends_at);

CREATE TABLE login_known (
	key   TEXT PRIMARY KEY,
	until BIGINT NOT NULL
);
CREATE INDEX login_known_until ON login_known (until);
