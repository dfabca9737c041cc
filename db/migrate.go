package db

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// applicationID marks a SQLite file as companion's ("Cmpn"); migration
// 0001 sets it.
const applicationID = 0x436d706e

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations are the embedded migrations in order, read at the first Open
// rather than at package init (start-up pays init before it can serve). A
// build whose files are misnumbered fails every test that opens a store.
var migrations = sync.OnceValues(func() ([]migration, error) { return loadMigrations(migrationFS) })

// migration is one schema step; applying it sets user_version to version.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the embedded migrations, named NNNN_what.sql, and
// checks that they are numbered 1, 2, 3, … without gaps.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	return loadMigrationsFrom(fsys, "migrations/*.sql")
}

// loadMigrationsFrom is loadMigrations for the files matching glob.
func loadMigrationsFrom(fsys fs.FS, glob string) ([]migration, error) {
	names, err := fs.Glob(fsys, glob)
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_what.sql", base)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d (versions must run 1, 2, 3, … without gaps or repeats)", m.name, i+1)
		}
	}
	return ms, nil
}

// checkSchema returns the file's schema version after making sure this
// build may use the file: it must be empty or companion's, and not written
// by a newer build.
func checkSchema(ctx context.Context, conn *sql.DB, file string) (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, fmt.Errorf("db: embedded migrations: %w", err)
	}
	version, appID, err := schemaVersion(ctx, conn)
	if err != nil {
		return 0, openErr(file, err)
	}
	if err := checkIDs(file, version, appID, len(ms)); err != nil {
		return 0, err
	}
	return version, nil
}

// checkIDs refuses a file whose user_version and application_id say it is
// another application's, or was written by a build that knows more than
// known migrations.
func checkIDs(file string, version, appID, known int) error {
	if (version > 0 || appID != 0) && appID != applicationID {
		return &openError{
			msg:  fmt.Sprintf("db: %s is a SQLite database of another application (application_id %#x, user_version %d); point --data-dir elsewhere", file, appID, version),
			kind: ErrNotDatabase,
		}
	}
	if version > known {
		return &openError{
			msg:  fmt.Sprintf("db: %s was written by a newer companion (schema version %d; this build knows versions up to %d); upgrade companion or point --data-dir elsewhere", file, version, known),
			kind: ErrSchemaTooNew,
		}
	}
	return nil
}

// migrate brings the database from version up to the newest embedded
// schema, in one transaction that also bumps user_version after each
// step, so a crash leaves the file at its old version or the newest, never
// between. One transaction, not one per migration: a first start creates
// the whole schema with one commit.
//
// Migrations run with foreign keys on (the pragma cannot change inside a
// transaction); a future migration that rebuilds a referenced table must
// use PRAGMA defer_foreign_keys.
func migrate(ctx context.Context, conn *sql.DB, file string, version int) error {
	ms, _ := migrations() // checkSchema has checked them
	if version >= len(ms) {
		return nil
	}
	var snap *migration
	if version == 0 {
		s, err := snapshot()
		if err != nil {
			return fmt.Errorf("db: embedded schema snapshot: %w", err)
		}
		if s != nil && s.version <= len(ms) {
			snap = s
		}
	}
	if err := apply(ctx, conn, ms[version:], snap); err != nil {
		return fmt.Errorf("db: migrate %s: %w", file, err)
	}
	return nil
}

func schemaVersion(ctx context.Context, q *sql.DB) (version, appID int, err error) {
	if err := q.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return 0, 0, err
	}
	if err := q.QueryRowContext(ctx, `PRAGMA application_id`).Scan(&appID); err != nil {
		return 0, 0, err
	}
	return version, appID, nil
}

// apply runs ms, consecutive migrations, in one transaction. Those the
// file already has (another process may have applied them while this one
// waited for the write lock) are skipped. A file still at version 0 gets
// snap instead of the migrations it stands for, if snap is not nil.
func apply(ctx context.Context, conn *sql.DB, ms []migration, snap *migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var cur int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&cur); err != nil {
		return err
	}
	if cur == 0 && snap != nil {
		if _, err := tx.ExecContext(ctx, snap.sql); err != nil {
			return fmt.Errorf("%s: %w", snap.name, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, snap.version)); err != nil {
			return fmt.Errorf("%s: %w", snap.name, err)
		}
		cur = snap.version
	}
	for _, m := range ms {
		if cur >= m.version {
			continue
		}
		if cur != m.version-1 {
			return fmt.Errorf("database is at schema version %d, expected %d", cur, m.version-1)
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		// PRAGMA takes no bound parameters; version is an int we parsed.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, m.version)); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		cur = m.version
	}
	return tx.Commit()
}
