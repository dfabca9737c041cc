package db

import "time"

// SetClock replaces the store's clock (used for UpdatedAt and tombstone
// removal times). Call it before the store is used concurrently.
func SetClock(s *Store, now func() time.Time) { s.now = now }

// SetPGClock replaces a PostgreSQL store's clock.
func SetPGClock(s *PGStore, now func() time.Time) { s.now = now }

// ListenerName is the application_name of a PostgreSQL store's
// WatchChanges connection.
func ListenerName(s *PGStore) string { return s.listenerName }
