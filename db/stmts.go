package db

import (
	"context"
	"database/sql"
	"fmt"
)

// Hot queries are prepared once per connection. Parsing and planning is
// about half the cost of a small write with modernc.org/sqlite, and the
// store runs a fixed set of queries. Other queries run unprepared.
//
// They are prepared when the store opens, never lazily: preparing through
// a pool needs a free connection, and the write pool's only connection is
// busy for the whole of a write transaction. Inside a transaction,
// database/sql then prepares a cached statement on the transaction's own
// connection (Tx.StmtContext), once per connection.
var (
	hotWrites = []string{qBumpRev, qUpsertWorkspace, qInsertOp, qUpdateOp, qDeleteOp}
	hotReads  = []string{qGetWorkspace, qFeedHead, qChangesSince, qGetAccount, qSessionUser, qTokenUser, qUserBySubject}
)

// stmts holds one pool's prepared statements by SQL text. It is not
// changed after Open, so it needs no lock.
type stmts struct {
	db *sql.DB
	m  map[string]*sql.Stmt
}

func prepare(ctx context.Context, db *sql.DB, queries []string) (*stmts, error) {
	c := &stmts{db: db, m: make(map[string]*sql.Stmt, len(queries))}
	for _, q := range queries {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("prepare %q: %w", q, err)
		}
		c.m[q] = st
	}
	return c, nil
}

func (c *stmts) close() {
	for _, st := range c.m {
		st.Close()
	}
}

// queryRow runs a single-row query outside a transaction.
func (c *stmts) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := c.m[query]; st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.db.QueryRowContext(ctx, query, args...)
}

// query runs a query outside a transaction.
func (c *stmts) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := c.m[query]; st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.db.QueryContext(ctx, query, args...)
}

// txn is a transaction that uses its pool's prepared statements.
type txn struct {
	ctx   context.Context
	tx    *sql.Tx
	cache *stmts
}

func (t txn) stmt(query string) *sql.Stmt {
	if st := t.cache.m[query]; st != nil {
		return t.tx.StmtContext(t.ctx, st)
	}
	return nil
}

func (t txn) exec(query string, args ...any) (sql.Result, error) {
	if st := t.stmt(query); st != nil {
		return st.ExecContext(t.ctx, args...)
	}
	return t.tx.ExecContext(t.ctx, query, args...)
}

func (t txn) query(query string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(query); st != nil {
		return st.QueryContext(t.ctx, args...)
	}
	return t.tx.QueryContext(t.ctx, query, args...)
}

func (t txn) queryRow(query string, args ...any) *sql.Row {
	if st := t.stmt(query); st != nil {
		return st.QueryRowContext(t.ctx, args...)
	}
	return t.tx.QueryRowContext(t.ctx, query, args...)
}
