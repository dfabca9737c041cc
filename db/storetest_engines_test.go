package db_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/db/storetest"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
)

// TestMain starts the throwaway PostgreSQL the pg tests use (or finds
// COMPANION_TEST_DATABASE) and stops it at the end.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// sqliteEngine opens SQLite stores for the shared cases.
var sqliteEngine = storetest.Engine{Open: func(t testing.TB, now func() time.Time) (storetest.Store, func() storetest.Store) {
	path := filepath.Join(t.TempDir(), "companion.db")
	open := func() storetest.Store {
		s := openAt(t, path)
		db.SetClock(s, now)
		t.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open
}}

// pgEngine opens PostgreSQL stores, each test on a fresh database.
var pgEngine = storetest.Engine{Open: func(t testing.TB, now func() time.Time) (storetest.Store, func() storetest.Store) {
	url := pgtest.NewDatabase(t)
	open := func() storetest.Store {
		s, err := db.OpenPostgres(context.Background(), url)
		if err != nil {
			t.Fatalf("OpenPostgres: %v", err)
		}
		db.SetPGClock(s, now)
		t.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open
}, LogsRevisions: true}

func TestStoreCasesSQLite(t *testing.T)     { storetest.Run(t, sqliteEngine) }
func TestStoreCasesPostgreSQL(t *testing.T) { storetest.Run(t, pgEngine) }
