package db

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Transaction bodies that are the same on both engines are written once,
// against tx, with SQLite's ? placeholders; the PostgreSQL side rewrites
// them to $1, $2, … (once per statement text). Only the opening and the
// committing of a transaction, and the few statements whose dialects
// differ, stay engine-specific.
type tx interface {
	// exec runs a statement and returns the rows it affected.
	exec(q string, args ...any) (int64, error)
	queryRow(q string, args ...any) scanner
	query(q string, args ...any) (rows, error)
	// forUpdate is the clause that locks the rows a SELECT reads until
	// the transaction ends: PostgreSQL's FOR UPDATE; nothing on SQLite,
	// whose write transaction already excludes every other writer.
	forUpdate() string
	// skipLocked is forUpdate that passes over rows another transaction
	// holds instead of waiting for them.
	skipLocked() string
}

// rows is a result set on either engine.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// engine is what a shared body needs of a store: its transactions and
// its clock.
type engine interface {
	writeTx(ctx context.Context, what string, f func(t tx) error) error
	// readTx runs f on one snapshot; f must not write.
	readTx(ctx context.Context, what string, f func(t tx) error) error
	// row runs a single-row read outside a transaction; rowsOf, a read
	// of many rows.
	row(ctx context.Context, q string, args ...any) scanner
	rowsOf(ctx context.Context, q string, args ...any) (rows, error)
	// wrapErr adds context to err as the engine's other errors get.
	wrapErr(what string, err error) error
	clock() time.Time
}

var (
	_ engine = (*Store)(nil)
	_ engine = (*PGStore)(nil)
)

func (s *Store) writeTx(ctx context.Context, what string, f func(t tx) error) error {
	return s.write(ctx, what, func(t txn) error { return f(liteTx{t}) })
}

func (s *Store) readTx(ctx context.Context, what string, f func(t tx) error) error {
	return s.read(ctx, what, func(t txn) error { return f(liteTx{t}) })
}

func (s *Store) row(ctx context.Context, q string, args ...any) scanner {
	return s.reads().queryRow(ctx, q, args...)
}

func (s *Store) rowsOf(ctx context.Context, q string, args ...any) (rows, error) {
	r, err := s.reads().query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return liteRows{r}, nil
}

func (s *Store) wrapErr(what string, err error) error { return wrap(what, err) }

func (s *Store) clock() time.Time { return s.now() }

func (s *PGStore) writeTx(ctx context.Context, what string, f func(t tx) error) error {
	return s.write(ctx, what, func(t pgx.Tx) error { return f(pgTx{ctx, t}) })
}

func (s *PGStore) readTx(ctx context.Context, what string, f func(t tx) error) error {
	return s.read(ctx, what, func(t pgx.Tx) error { return f(pgTx{ctx, t}) })
}

func (s *PGStore) row(ctx context.Context, q string, args ...any) scanner {
	return s.pool.QueryRow(ctx, pgText(q), args...)
}

func (s *PGStore) rowsOf(ctx context.Context, q string, args ...any) (rows, error) {
	r, err := s.pool.Query(ctx, pgText(q), args...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (s *PGStore) wrapErr(what string, err error) error { return s.wrap(what, err) }

func (s *PGStore) clock() time.Time { return s.now() }

// liteTx is a SQLite transaction (with its pool's prepared statements).
type liteTx struct{ t txn }

func (l liteTx) exec(q string, args ...any) (int64, error) {
	res, err := l.t.exec(q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (l liteTx) queryRow(q string, args ...any) scanner { return l.t.queryRow(q, args...) }

func (l liteTx) query(q string, args ...any) (rows, error) {
	r, err := l.t.query(q, args...)
	if err != nil {
		return nil, err
	}
	return liteRows{r}, nil
}

func (liteTx) forUpdate() string  { return "" }
func (liteTx) skipLocked() string { return "" }

type liteRows struct{ *sql.Rows }

func (r liteRows) Close() { r.Rows.Close() }

// pgTx is a PostgreSQL transaction; pgx prepares and caches each
// statement per connection.
type pgTx struct {
	ctx context.Context
	t   pgx.Tx
}

func (p pgTx) exec(q string, args ...any) (int64, error) {
	tag, err := p.t.Exec(p.ctx, pgText(q), args...)
	return tag.RowsAffected(), err
}

func (p pgTx) queryRow(q string, args ...any) scanner { return p.t.QueryRow(p.ctx, pgText(q), args...) }

func (p pgTx) query(q string, args ...any) (rows, error) {
	r, err := p.t.Query(p.ctx, pgText(q), args...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (pgTx) forUpdate() string  { return " FOR UPDATE" }
func (pgTx) skipLocked() string { return " FOR UPDATE SKIP LOCKED" }

// pgTexts caches pgSQL's rewrites by statement text.
var pgTexts sync.Map

func pgText(q string) string {
	if v, ok := pgTexts.Load(q); ok {
		return v.(string)
	}
	v := pgSQL(q)
	pgTexts.Store(q, v)
	return v
}

// scanRows reads every row with scan and closes r.
func scanRows[T any](r rows, scan func(scanner) (T, error)) ([]T, error) {
	defer r.Close()
	var list []T
	for r.Next() {
		v, err := scan(r)
		if err != nil {
			return nil, err
		}
		list = append(list, v)
	}
	return list, r.Err()
}
