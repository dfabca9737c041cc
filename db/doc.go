// Package db is companion's durable state: a SQLite file (modernc.org/sqlite,
// pure Go) that implements core.Store, plus the hash pins of installed Wasm
// provider modules. All of companion's SQL lives in this package.
//
// The file is opened in WAL mode with synchronous=NORMAL, foreign keys on
// and a busy timeout. Writes go through one dedicated connection and every
// write transaction starts with BEGIN IMMEDIATE, so writers inside one
// process queue in Go instead of contending for SQLite's lock, and a writer
// in another process is waited for (busy timeout) rather than failing
// halfway through a transaction. Reads use a small separate pool of
// read-only connections; under WAL they never block the writer or each
// other.
//
// The schema is versioned by embedded migrations (migrations/NNNN_name.sql),
// each applied in its own transaction, with the version in PRAGMA
// user_version. A file written by a newer build is refused, never
// downgraded.
//
// Times are stored as unix nanoseconds in UTC and come back in UTC; the
// zero time is stored as NULL and comes back as the zero time. Times outside
// the years 1678 to 2262 cannot be stored and are refused as invalid.
package db
