package db

import (
	"context"
	"errors"
	"fmt"
)

// ErrMigrationsPending is in Ready's error when the store answers but its
// schema is not the newest this build knows.
var ErrMigrationsPending = errors.New("migrations are not done")

// Ready reports whether the store answers and its schema is the newest
// this build knows (every migration done), for readiness probes: one read
// of the write connection, so a file that cannot be written to is found
// as well as one that cannot be read.
func (s *Store) Ready(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	var version int
	if err := s.w.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("the database %s does not answer: %w", s.path, err)
	}
	if version != len(ms) {
		return fmt.Errorf("the database %s is at schema version %d, not %d: %w", s.path, version, len(ms), ErrMigrationsPending)
	}
	return nil
}

// Ready reports whether PostgreSQL answers and its schema is the newest
// this build knows (every migration done), for readiness probes.
func (s *PGStore) Ready(ctx context.Context) error {
	ms, err := pgMigrations()
	if err != nil {
		return err
	}
	var version int
	if err := s.pool.QueryRow(ctx, `SELECT version FROM companion_schema`).Scan(&version); err != nil {
		return fmt.Errorf("PostgreSQL at %s does not answer: %w", s.where, err)
	}
	if version != len(ms) {
		return fmt.Errorf("PostgreSQL at %s is at schema version %d, not %d: %w", s.where, version, len(ms), ErrMigrationsPending)
	}
	return nil
}
