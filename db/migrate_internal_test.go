package db

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func TestEmbeddedMigrationsLoad(t *testing.T) {
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].name != "0001_init.sql" {
		t.Fatalf("migrations = %v", ms)
	}
}

func TestLoadMigrationsRejectsBadSets(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"gap":       {"migrations/0001_a.sql": {}, "migrations/0003_c.sql": {}},
		"repeat":    {"migrations/0001_a.sql": {}, "migrations/0001_b.sql": {}},
		"bad name":  {"migrations/init.sql": {}},
		"zero":      {"migrations/0000_a.sql": {}},
		"no number": {"migrations/x_a.sql": {}},
	} {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: loadMigrations succeeded", name)
		}
	}
	ms, err := loadMigrations(fstest.MapFS{"migrations/0002_b.sql": {Data: []byte("B")}, "migrations/0001_a.sql": {Data: []byte("A")}})
	if err != nil || len(ms) != 2 || ms[0].sql != "A" || ms[1].version != 2 {
		t.Fatalf("loadMigrations = %v, %v", ms, err)
	}
}

// TestConnectionSettings checks the pragmas every connection runs with and
// that the read pool cannot write.
func TestConnectionSettings(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, pool := range []struct {
		name string
		q    func(string) (string, error)
	}{
		{"writer", func(q string) (v string, err error) { err = s.w.QueryRowContext(ctx, q).Scan(&v); return }},
		{"reader", func(q string) (v string, err error) { err = s.r.QueryRowContext(ctx, q).Scan(&v); return }},
	} {
		for pragma, want := range map[string]string{
			"journal_mode": "wal",
			"foreign_keys": "1",
			"synchronous":  "1", // NORMAL
			"busy_timeout": "5000",
		} {
			got, err := pool.q("PRAGMA " + pragma)
			if err != nil || got != want {
				t.Errorf("%s: PRAGMA %s = %q, %v; want %q", pool.name, pragma, got, err, want)
			}
		}
	}
	if _, err := s.r.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('x', 1)`); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("write through the read pool: %v, want a read-only error", err)
	}
	if n := s.w.Stats().MaxOpenConnections; n != 1 {
		t.Errorf("writer pool allows %d connections, want 1", n)
	}
}

// TestFailedMigrationLeavesNoTrace: a migration that fails halfway is
// rolled back whole, version included.
func TestFailedMigrationLeavesNoTrace(t *testing.T) {
	ctx := context.Background()
	conn := openRaw(t)
	bad := migration{version: 1, name: "0001_bad.sql", sql: `CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1); CREATE TABLE a (y INTEGER);`}
	if err := apply(ctx, conn, []migration{bad}, nil); err == nil {
		t.Fatal("a failing migration was applied")
	}
	var v, tables int
	conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v)
	conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'a'`).Scan(&tables)
	if v != 0 || tables != 0 {
		t.Fatalf("after a failed migration: user_version %d, table a exists %v", v, tables == 1)
	}
	good := migration{version: 1, name: "0001_good.sql", sql: `CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);`}
	if err := apply(ctx, conn, []migration{good}, nil); err != nil {
		t.Fatal(err)
	}
	// Applying it again (another process got there first) is a no-op.
	if err := apply(ctx, conn, []migration{good}, nil); err != nil {
		t.Fatal(err)
	}
	conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v)
	conn.QueryRowContext(ctx, `SELECT count(*) FROM a`).Scan(&tables)
	if v != 1 || tables != 1 {
		t.Fatalf("user_version %d, %d rows; want 1, 1", v, tables)
	}
	// Pending migrations run as one: a failure in the last undoes the
	// ones before it too.
	two := migration{version: 2, name: "0002_b.sql", sql: `CREATE TABLE b (x INTEGER);`}
	three := migration{version: 3, name: "0003_bad.sql", sql: `CREATE TABLE a (y INTEGER);`}
	if err := apply(ctx, conn, []migration{two, three}, nil); err == nil || !strings.Contains(err.Error(), "0003_bad.sql") {
		t.Fatalf("a batch with a failing migration: %v, want its name in an error", err)
	}
	conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v)
	conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'b'`).Scan(&tables)
	if v != 1 || tables != 0 {
		t.Fatalf("after a failed batch: user_version %d, table b exists %v; want 1, no", v, tables == 1)
	}
}
