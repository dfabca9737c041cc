package db

import (
	"context"
	"testing"

	"github.com/canvasapp/companion/internal/testsupport/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestPostgresStoreRunsReadCommitted: the store's statements are written
// for READ COMMITTED (a batch's later statement sees what committed before
// it started); a database whose default is stricter does not change what
// the store's connections use.
func TestPostgresStoreRunsReadCommitted(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var name string
	if err := admin.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` SET default_transaction_isolation = 'repeatable read'`); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	s, err := OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var level string
	if err := s.pool.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "read committed" {
		t.Fatalf("the store's statements run at %q, want read committed", level)
	}
}
