package db

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateSnapshot = flag.Bool("update", false, "rewrite db/schema/NNNN.sql from the migrations")

// openRaw opens a new, empty database file the way the store's write
// connection does, without migrating it.
func openRaw(t *testing.T) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "companion.db")
	conn, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	conn.SetMaxOpenConns(1)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// dumpDatabase is everything a migration can leave in a file: the two
// header fields companion sets, every schema entry (auto-indexes and
// sqlite_sequence included, in creation order) and every row of every
// table.
func dumpDatabase(t *testing.T, conn *sql.DB) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	version, appID, err := schemaVersion(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "user_version %d\napplication_id %d\n", version, appID)
	rows, err := conn.QueryContext(ctx, `SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var typ, name, tbl, text string
		if err := rows.Scan(&typ, &name, &tbl, &text); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %s\n%s\n", typ, name, tbl, text)
		if typ == "table" {
			tables = append(tables, name)
		}
	}
	rows.Close()
	for _, table := range tables {
		b.WriteString(tableRows(t, conn, table, false))
	}
	return b.String()
}

// tableRows is table's rows as INSERT statements, sorted; with skipEmpty
// an empty table gives "".
func tableRows(t *testing.T, conn *sql.DB, table string, skipEmpty bool) string {
	t.Helper()
	ctx := context.Background()
	crows, err := conn.QueryContext(ctx, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
	if err != nil {
		t.Fatal(err)
	}
	var cols, quoted []string
	for crows.Next() {
		var c string
		if err := crows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
		quoted = append(quoted, fmt.Sprintf(`quote("%s")`, c))
	}
	crows.Close()
	rows, err := conn.QueryContext(ctx, fmt.Sprintf(`SELECT %s FROM "%s"`, strings.Join(quoted, ` || ', ' || `), table))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		var vals string
		if err := rows.Scan(&vals); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s);\n", table, strings.Join(cols, ", "), vals))
	}
	rows.Close()
	sort.Strings(lines)
	if len(lines) == 0 && skipEmpty {
		return ""
	}
	return strings.Join(lines, "")
}

// snapshotScript is the script that recreates what conn holds: the
// application id, the schema in creation order (SQLite's own entries left
// to SQLite) and the rows.
func snapshotScript(t *testing.T, conn *sql.DB, version int) string {
	t.Helper()
	ctx := context.Background()
	_, appID, err := schemaVersion(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- The schema and rows that migrations 0001 to %04d leave in a new\n", version)
	b.WriteString("-- database, as one script (see schema.go). Generated: do not edit; run\n")
	b.WriteString("-- go test ./db -run TestSchemaSnapshot -update\n\n")
	fmt.Fprintf(&b, "PRAGMA application_id = %d;\n\n", appID)
	rows, err := conn.QueryContext(ctx, `SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var typ, name, text string
		if err := rows.Scan(&typ, &name, &text); err != nil {
			t.Fatal(err)
		}
		b.WriteString(text + ";\n\n")
		if typ == "table" {
			tables = append(tables, name)
		}
	}
	rows.Close()
	for _, table := range tables {
		b.WriteString(tableRows(t, conn, table, true))
	}
	return b.String()
}

// TestSchemaSnapshot: a new database made from the snapshot (and the
// migrations after it) is the same as one made by every migration, and the
// snapshot is what the migrations it stands for produce.
func TestSchemaSnapshot(t *testing.T) {
	ctx := context.Background()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if *updateSnapshot {
		conn := openRaw(t)
		if err := apply(ctx, conn, ms, nil); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join("schema", fmt.Sprintf("%04d.sql", len(ms)))
		if err := os.WriteFile(file, []byte(snapshotScript(t, conn, len(ms))), 0o644); err != nil {
			t.Fatal(err)
		}
		if snap != nil && snap.version != len(ms) {
			os.Remove(filepath.Join("schema", strings.TrimPrefix(snap.name, "schema snapshot ")))
		}
		t.Logf("wrote %s; rerun without -update", file)
		return
	}
	if snap == nil {
		t.Fatal("no schema snapshot in db/schema; run go test ./db -run TestSchemaSnapshot -update")
	}
	if snap.version > len(ms) {
		t.Fatalf("%s is for version %d, but there are %d migrations", snap.name, snap.version, len(ms))
	}

	migrated := openRaw(t)
	if err := apply(ctx, migrated, ms, nil); err != nil {
		t.Fatal(err)
	}
	fromSnapshot := openRaw(t)
	if err := apply(ctx, fromSnapshot, ms, snap); err != nil {
		t.Fatal(err)
	}
	if got, want := dumpDatabase(t, fromSnapshot), dumpDatabase(t, migrated); got != want {
		t.Fatalf("a database made from %s differs from one made by the migrations:\n--- snapshot\n%s\n--- migrations\n%s", snap.name, got, want)
	}

	upTo := openRaw(t)
	if err := apply(ctx, upTo, ms[:snap.version], nil); err != nil {
		t.Fatal(err)
	}
	if got, want := snap.sql, snapshotScript(t, upTo, snap.version); got != want {
		t.Fatalf("%s is not what migrations 1 to %d produce; run go test ./db -run TestSchemaSnapshot -update", snap.name, snap.version)
	}
}
