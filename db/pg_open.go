package db

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/canvasapp/companion/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PGStore is companion's store on PostgreSQL (github.com/jackc/pgx/v5). It
// implements the same interfaces as Store, with the same guarantees, and
// several companion processes may share one database: every write is one
// transaction, and the feed's revision counter is a row whose lock orders
// revisions in commit order. Statements are prepared once per pooled
// connection (pgx's statement cache). Safe for concurrent use; Close it
// when done.
type PGStore struct {
	pool     *pgxpool.Pool
	where    string // the URL without its password, for messages
	instance string
	now      func() time.Time
	// listenerName is the application_name of WatchChanges' connection;
	// it also marks the stream messages this store relays (RelayStream),
	// so that its listener skips them.
	listenerName string
	// receive is ReceiveStream's callback, or nil.
	receive atomic.Pointer[func(core.Relayed)]
}

//go:embed postgres/migrations/*.sql
var pgMigrationFS embed.FS

// pgMigrations are PostgreSQL's migrations, numbered on their own (the two
// engines' histories differ: PostgreSQL's starts at SQLite's fifth step).
var pgMigrations = sync.OnceValues(func() ([]migration, error) {
	return loadMigrationsFrom(pgMigrationFS, "postgres/migrations/*.sql")
})

// pgMigrateLock is the advisory lock key replicas take while migrating, so
// two starting at once apply each step once.
const pgMigrateLock = 0x436d706e0001

// IsPostgresURL reports whether s names a PostgreSQL database
// (postgres:// or postgresql://).
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// RedactURL is u with any password replaced, for logs and messages.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an unparsable database URL)"
	}
	return p.Redacted()
}

// OpenPostgres connects to the database at dsn (a postgres:// URL), brings
// its schema up to date and returns the store. A database that holds
// tables but no companion schema is refused with ErrNotDatabase, one
// written by a newer companion with ErrSchemaTooNew; neither is modified.
func OpenPostgres(ctx context.Context, dsn string) (*PGStore, error) {
	where := RedactURL(dsn)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("db: database URL %s: %w (expected postgres://user:password@host:port/dbname)", where, err)
	}
	// Every statement of the store is written for READ COMMITTED,
	// PostgreSQL's default, whatever default the server or the role set:
	// each statement sees what committed before it started, even within a
	// batch (TryLeaseWorkspaceRead's read after its lease).
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("db: connect to %s: %w", where, err)
	}
	s := &PGStore{pool: pool, where: where, now: time.Now, listenerName: core.NewID(listenerApp)}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("db: connect to %s: %w; check that PostgreSQL runs there and the URL's user may log in", where, err)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	id := core.NewID("inst")
	if _, err := pool.Exec(ctx, `INSERT INTO instance (id) VALUES ($1) ON CONFLICT DO NOTHING`, id); err != nil {
		pool.Close()
		return nil, s.wrap("record instance id", err)
	}
	if err := pool.QueryRow(ctx, `SELECT id FROM instance`).Scan(&s.instance); err != nil {
		pool.Close()
		return nil, s.wrap("read instance id", err)
	}
	return s, nil
}

// migrate applies the pending migrations, each in its own transaction
// under an advisory lock, with the version in companion_schema.
func (s *PGStore) migrate(ctx context.Context) error {
	if _, err := pgMigrations(); err != nil {
		return fmt.Errorf("db: embedded PostgreSQL migrations: %w", err)
	}
	for {
		done, err := s.migrateOne(ctx)
		if err != nil || done {
			return err
		}
	}
}

// migrateOne applies the next pending migration; done is true when there
// is none.
func (s *PGStore) migrateOne(ctx context.Context) (done bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, s.wrap("migrate", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pgMigrateLock)); err != nil {
		return false, s.wrap("migrate", err)
	}
	var hasSchema bool
	var tables int
	if err := tx.QueryRow(ctx, `SELECT to_regclass('companion_schema') IS NOT NULL,
		(SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema())`).Scan(&hasSchema, &tables); err != nil {
		return false, s.wrap("migrate", err)
	}
	version := 0
	if hasSchema {
		if err := tx.QueryRow(ctx, `SELECT version FROM companion_schema`).Scan(&version); err != nil {
			return false, s.wrap("read schema version", err)
		}
	} else if tables > 0 {
		return false, &openError{
			msg:  fmt.Sprintf("db: %s holds tables of another application; point --database at an empty database", s.where),
			kind: ErrNotDatabase,
		}
	}
	ms, _ := pgMigrations() // migrate has checked them
	if version > len(ms) {
		return false, &openError{
			msg:  fmt.Sprintf("db: %s was written by a newer companion (schema version %d, this build knows %d); upgrade companion", s.where, version, len(ms)),
			kind: ErrSchemaTooNew,
		}
	}
	if version == len(ms) {
		return true, nil
	}
	m := ms[version]
	if !hasSchema {
		if _, err := tx.Exec(ctx, `CREATE TABLE companion_schema (
			one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), version INTEGER NOT NULL);
			INSERT INTO companion_schema (version) VALUES (0)`, pgx.QueryExecModeSimpleProtocol); err != nil {
			return false, s.wrap("create schema table", err)
		}
	}
	if _, err := tx.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		return false, s.wrap("apply migration "+m.name, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE companion_schema SET version = $1`, m.version); err != nil {
		return false, s.wrap("apply migration "+m.name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, s.wrap("apply migration "+m.name, err)
	}
	return false, nil
}

// Close closes the pool.
func (s *PGStore) Close() error {
	s.pool.Close()
	return nil
}

// Where is the database URL without its password.
func (s *PGStore) Where() string { return s.where }

// InstanceID returns the random id made when the database was created.
func (s *PGStore) InstanceID(ctx context.Context) (string, error) {
	return s.instance, nil
}

// write runs f in a read-committed transaction and commits it.
func (s *PGStore) write(ctx context.Context, what string, f func(tx pgx.Tx) error) error {
	return s.inTx(ctx, what, pgx.TxOptions{}, f)
}

// read runs f in a read-only repeatable-read transaction, so every query in
// f sees one snapshot.
func (s *PGStore) read(ctx context.Context, what string, f func(tx pgx.Tx) error) error {
	return s.inTx(ctx, what, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, f)
}

func (s *PGStore) inTx(ctx context.Context, what string, opts pgx.TxOptions, f func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return s.wrap(what, err)
	}
	defer tx.Rollback(ctx)
	if err := f(tx); err != nil {
		return s.wrap(what, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.wrap(what, err)
	}
	return nil
}

// wrap adds context to err. A *core.Error passes through; a failure a
// person can act on (server unreachable, disk full) becomes a
// KindUnavailable core.Error.
func (s *PGStore) wrap(what string, err error) error {
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	var oe *openError
	if errors.As(err, &oe) {
		return err
	}
	inner := fmt.Errorf("db: %s: %w", what, err)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100":
			return &core.Error{Kind: core.KindUnavailable, Message: "companion's database could not be written: PostgreSQL's disk is full", Err: inner}
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"):
			return &core.Error{Kind: core.KindUnavailable, Message: "companion's PostgreSQL database is not reachable; try again", Err: inner}
		}
		return inner
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return &core.Error{Kind: core.KindUnavailable, Message: "companion's PostgreSQL database is not reachable; try again", Err: inner}
	}
	return inner
}

// pgSQL turns a query written with SQLite's ? placeholders into
// PostgreSQL's $1, $2, …, so both engines share the queries that are the
// same in both dialects. Queries here hold no literal '?'.
func pgSQL(q string) string {
	b := make([]byte, 0, len(q)+strings.Count(q, "?")*2)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b = append(b, '$')
			b = strconv.AppendInt(b, int64(n), 10)
			continue
		}
		b = append(b, q[i])
	}
	return string(b)
}
