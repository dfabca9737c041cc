package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"

	"github.com/jackc/pgx/v5"
)

func pgExec(t *testing.T, url, q string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, q); err != nil {
		t.Fatal(err)
	}
}

func TestPostgresRefusesNewerSchema(t *testing.T) {
	url := pgtest.NewDatabase(t)
	s, err := db.OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	pgExec(t, url, `UPDATE companion_schema SET version = version + 1`)
	_, err = db.OpenPostgres(context.Background(), url)
	if !errors.Is(err, db.ErrSchemaTooNew) {
		t.Fatalf("OpenPostgres of a newer schema: %v, want ErrSchemaTooNew", err)
	}
}

func TestPostgresRefusesForeignDatabase(t *testing.T) {
	url := pgtest.NewDatabase(t)
	pgExec(t, url, `CREATE TABLE invoices (id int); INSERT INTO invoices VALUES (1)`)
	_, err := db.OpenPostgres(context.Background(), url)
	if !errors.Is(err, db.ErrNotDatabase) {
		t.Fatalf("OpenPostgres of another application's database: %v, want ErrNotDatabase", err)
	}
}

func TestPostgresBadURL(t *testing.T) {
	_, err := db.OpenPostgres(context.Background(), "postgres://companion:secretpw@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil {
		t.Fatal("OpenPostgres of a closed port succeeded")
	}
	if msg := err.Error(); len(msg) == 0 || contains(msg, "secretpw") {
		t.Errorf("error %q is empty or shows the password", msg)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
