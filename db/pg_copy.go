package db

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// copyTable is one table the SQLite-to-PostgreSQL copy moves, with its
// columns in both engines' order and the key that orders rows for the
// checksum. bools are columns SQLite keeps as 0/1 and PostgreSQL as
// BOOLEAN.
type copyTable struct {
	name, order string
	intKey      bool // the order key is an integer, not text
	cols        []string
	bools       map[string]bool
}

// copyTables lists every table on main in an order that satisfies the
// foreign keys. A table added to both engines' migrations is added here.
// It is built at first use: only `companion migrate` needs it, and package
// init runs at every start of the binary.
var copyTables = sync.OnceValue(func() []copyTable {
	return []copyTable{
		{name: "accounts", order: "id", cols: strings.Split(accountCols, ", ")},
		{name: "account_flags", order: "account_id", cols: []string{"account_id", "code", "message", "since"}},
		{name: "workspaces", order: "id", cols: splitCols(workspaceCols), bools: map[string]bool{"adopted": true, "keep": true, "at_risk": true}},
		{name: "plans", order: "token_hash", cols: []string{"token_hash", "workspace_id", "state", "box_id", "last_activity_at", "created_at", "expires_at"}},
		{name: "ops", order: "id", intKey: true, cols: strings.Split(opCols, ", ")},
		{name: "module_pins", order: "name", cols: []string{"name", "sha256", "manifest", "updated_at"}},
		{name: "audit", order: "id", intKey: true, cols: strings.Split(auditCols, ", ")},
		{name: "exports", order: "id", cols: strings.Split(exportCols, ", "), bools: map[string]bool{"verified": true}},
		{name: "secrets", order: "key", cols: []string{"key", "key_id", "sealed", "updated_at"}},
		{name: "restores", order: "workspace_id", cols: []string{"workspace_id", "export_id", "created_at", "method"}},
		{name: "retention_policies", order: "account_id", bools: map[string]bool{"enabled": true},
			cols: []string{"account_id", "enabled", "paused_for", "warn_before", "storage_price_per_gib_month", "updated_at"}},
		{name: "retention_claims", order: "workspace_id", cols: strings.Split(claimCols, ", "), bools: map[string]bool{"launched": true}},
		{name: "retention_warnings", order: "workspace_id", cols: []string{"workspace_id", "delete_after"}},
		{name: "users", order: "id", cols: strings.Split(userCols, ", ")},
		{name: "sessions", order: "id_hash", cols: []string{"id_hash", "user_id", "method", "created_at", "last_seen_at", "expires_at"}},
		{name: "api_tokens", order: "id", cols: []string{"id", "token_hash", "user_id", "label", "scope", "created_at", "expires_at", "last_used_at"}},
		{name: "login_failures", order: "key", cols: []string{"key", "ends_at", "n"}},
		{name: "login_known", order: "key", cols: []string{"key", "until"}},
		{name: "webhooks", order: "id", cols: strings.Split(webhookCols, ", ")},
		{name: "webhook_deliveries", order: "id", cols: strings.Split(deliveryCols, ", ")},
	}
})

// copyCounters are the meta counters that travel with the rows.
var copyCounters = []string{"rev", "floor", "audit_head"}

func splitCols(s string) []string {
	var out []string
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// TableCopy is what was copied of one table, and its checksum, the same on
// both sides.
type TableCopy struct {
	Table  string `json:"table"`
	Rows   int    `json:"rows"`
	SHA256 string `json:"sha256"`
}

// CopyToPostgres copies every row of the SQLite store src into the
// PostgreSQL store dst, which must hold no companion data yet, along with
// the feed and audit counters and the instance id (sealed secrets are
// bound to it). The copy is one PostgreSQL transaction: when it fails,
// dst is left empty. Afterwards each table is read back from both sides
// and its row count and checksum compared; a mismatch is an error.
// Nothing in src is changed. src must not be in use by a running
// companion (the caller holds the data dir's lock).
func CopyToPostgres(ctx context.Context, src *Store, dst *PGStore) ([]TableCopy, error) {
	for _, t := range copyTables() {
		var n int
		if err := dst.pool.QueryRow(ctx, `SELECT count(*) FROM `+t.name).Scan(&n); err != nil {
			return nil, dst.wrap("count "+t.name, err)
		}
		if n > 0 {
			return nil, fmt.Errorf("db: %s already holds companion data (%d rows in %s); copy only into an empty database", dst.where, n, t.name)
		}
	}
	err := dst.write(ctx, "copy from SQLite", func(tx pgx.Tx) error {
		for _, t := range copyTables() {
			rows, err := readSQLiteRows(ctx, src, t)
			if err != nil {
				return err
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(rows)); err != nil {
				return fmt.Errorf("copy %s: %w", t.name, err)
			}
		}
		for _, k := range copyCounters {
			var v int64
			if err := src.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, k).Scan(&v); err != nil {
				return fmt.Errorf("read counter %s: %w", k, err)
			}
			if _, err := tx.Exec(ctx, `UPDATE meta SET value = $1 WHERE key = $2`, v, k); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE instance SET id = $1`, src.instance); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('ops', 'id'), coalesce((SELECT max(id) FROM ops), 0) + 1, false)`)
		return err
	})
	if err != nil {
		return nil, err
	}
	dst.instance = src.instance
	return VerifyCopy(ctx, src, dst)
}

// VerifyCopy compares every copied table and counter of src and dst.
func VerifyCopy(ctx context.Context, src *Store, dst *PGStore) ([]TableCopy, error) {
	var out []TableCopy
	for _, t := range copyTables() {
		a, err := sqliteChecksum(ctx, src, t)
		if err != nil {
			return out, err
		}
		b, err := pgChecksum(ctx, dst, t)
		if err != nil {
			return out, err
		}
		if a != b {
			return out, fmt.Errorf("db: table %s differs after the copy: SQLite has %d rows (sha256 %s), PostgreSQL %d (sha256 %s); drop the PostgreSQL database and run the copy again", t.name, a.Rows, a.SHA256, b.Rows, b.SHA256)
		}
		out = append(out, a)
	}
	for _, k := range copyCounters {
		var a, b int64
		if err := src.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, k).Scan(&a); err != nil {
			return out, wrap("read counter "+k, err)
		}
		if err := dst.pool.QueryRow(ctx, `SELECT value FROM meta WHERE key = $1`, k).Scan(&b); err != nil {
			return out, dst.wrap("read counter "+k, err)
		}
		if a != b {
			return out, fmt.Errorf("db: counter %s differs after the copy: SQLite %d, PostgreSQL %d", k, a, b)
		}
	}
	return out, nil
}

func readSQLiteRows(ctx context.Context, src *Store, t copyTable) ([][]any, error) {
	rows, err := src.r.QueryContext(ctx, `SELECT `+strings.Join(t.cols, ", ")+` FROM `+t.name+` ORDER BY `+t.order)
	if err != nil {
		return nil, fmt.Errorf("read %s from SQLite: %w", t.name, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals, err := scanAny(rows, len(t.cols))
		if err != nil {
			return nil, fmt.Errorf("read %s from SQLite: %w", t.name, err)
		}
		for i, c := range t.cols {
			if n, ok := vals[i].(int64); ok && t.bools[c] {
				vals[i] = n != 0
			}
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

func scanAny(r scanner, n int) ([]any, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	return vals, r.Scan(ptrs...)
}

// rowHasher hashes rows of values in a form both engines' drivers agree
// on: integers and booleans as integers, text as text, bytes as bytes,
// every value tagged and length-prefixed.
type rowHasher struct {
	h hash.Hash
	n int
}

func (rh *rowHasher) add(vals []any) error {
	rh.n++
	for _, v := range vals {
		var tag byte
		var b []byte
		switch x := v.(type) {
		case nil:
			tag = 'N'
		case int64:
			tag, b = 'i', binary.BigEndian.AppendUint64(nil, uint64(x))
		case int32:
			tag, b = 'i', binary.BigEndian.AppendUint64(nil, uint64(int64(x)))
		case bool:
			n := int64(0)
			if x {
				n = 1
			}
			tag, b = 'i', binary.BigEndian.AppendUint64(nil, uint64(n))
		case float64:
			tag, b = 'f', binary.BigEndian.AppendUint64(nil, math.Float64bits(x))
		case string:
			tag, b = 's', []byte(x)
		case []byte:
			tag, b = 'b', x
		default:
			return fmt.Errorf("unexpected column value of type %T", v)
		}
		rh.h.Write([]byte{tag})
		rh.h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
		rh.h.Write(b)
	}
	return nil
}

func (rh *rowHasher) result(table string) TableCopy {
	return TableCopy{Table: table, Rows: rh.n, SHA256: hex.EncodeToString(rh.h.Sum(nil))}
}

func sqliteChecksum(ctx context.Context, src *Store, t copyTable) (TableCopy, error) {
	rows, err := src.r.QueryContext(ctx, `SELECT `+strings.Join(t.cols, ", ")+` FROM `+t.name+` ORDER BY `+t.order)
	if err != nil {
		return TableCopy{}, wrap("checksum "+t.name, err)
	}
	return checksumRows(t, rows.Next, rows.Err, rows.Close, rows)
}

func pgChecksum(ctx context.Context, dst *PGStore, t copyTable) (TableCopy, error) {
	// Text keys are ordered by bytes (COLLATE "C"), as SQLite orders them.
	order := t.order
	if !t.intKey {
		order += ` COLLATE "C"`
	}
	rows, err := dst.pool.Query(ctx, `SELECT `+strings.Join(t.cols, ", ")+` FROM `+t.name+` ORDER BY `+order)
	if err != nil {
		return TableCopy{}, dst.wrap("checksum "+t.name, err)
	}
	return checksumRows(t, rows.Next, rows.Err, func() error { rows.Close(); return nil }, rows)
}

func checksumRows(t copyTable, next func() bool, errf func() error, closef func() error, r scanner) (TableCopy, error) {
	defer closef()
	rh := &rowHasher{h: sha256.New()}
	for next() {
		vals, err := scanAny(r, len(t.cols))
		if err != nil {
			return TableCopy{}, fmt.Errorf("db: checksum %s: %w", t.name, err)
		}
		if err := rh.add(vals); err != nil {
			return TableCopy{}, fmt.Errorf("db: checksum %s: %w", t.name, err)
		}
	}
	if err := errf(); err != nil {
		return TableCopy{}, fmt.Errorf("db: checksum %s: %w", t.name, err)
	}
	return rh.result(t.name), nil
}
