package db

import (
	"context"
	"time"
)

// SetClock replaces the store's clock (used for UpdatedAt and tombstone
// removal times). Call it before the store is used concurrently.
func SetClock(s *Store, now func() time.Time) { s.now = now }

// SetPGClock replaces a PostgreSQL store's clock.
func SetPGClock(s *PGStore, now func() time.Time) { s.now = now }

// CountRows counts table's rows on either engine, for tests of pruning.
func CountRows(t interface{ Fatal(...any) }, s any, table string) int {
	var n int
	var err error
	q := "SELECT count(*) FROM " + table
	switch s := s.(type) {
	case *Store:
		err = s.r.QueryRow(q).Scan(&n)
	case *PGStore:
		err = s.pool.QueryRow(context.Background(), q).Scan(&n)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ListenerName is the application_name of a PostgreSQL store's
// WatchChanges connection.
func ListenerName(s *PGStore) string { return s.listenerName }
