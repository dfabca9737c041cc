package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/canvasapp/companion/db"
	_ "modernc.org/sqlite"
)

// The statements db runs to list and to upsert workspaces, copied here so
// raw modernc.org/sqlite can run exactly them in the same process (the db
// package keeps its SQL unexported). If db's SQL changes, change these.
const (
	rawCols = `id, owner, name, account_id, provider, state, box_id, box_url, adopted,
	idle_pause_after, paused_ttl, options, paused_at, last_activity_at,
	size_bytes, size_source, size_at, keep, delete_after, error,
	created_at, updated_at, rev, removed_at, stop_reason, exit_code`
	rawList    = `SELECT ` + rawCols + ` FROM workspaces WHERE removed_at IS NULL ORDER BY rev`
	rawBumpRev = `UPDATE meta SET value = value + 1 WHERE key = 'rev' RETURNING value`
	rawUpsert  = `INSERT INTO workspaces (` + rawCols + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (id) DO UPDATE SET
		owner = excluded.owner, name = excluded.name, account_id = excluded.account_id,
		provider = excluded.provider, state = excluded.state, box_id = excluded.box_id,
		box_url = excluded.box_url, adopted = excluded.adopted,
		idle_pause_after = excluded.idle_pause_after, paused_ttl = excluded.paused_ttl,
		options = excluded.options, paused_at = excluded.paused_at,
		last_activity_at = excluded.last_activity_at, size_bytes = excluded.size_bytes,
		size_source = excluded.size_source, size_at = excluded.size_at, keep = excluded.keep,
		delete_after = excluded.delete_after, error = excluded.error,
		created_at = excluded.created_at, updated_at = excluded.updated_at, rev = excluded.rev,
		stop_reason = excluded.stop_reason, exit_code = excluded.exit_code,
		removed_at = CASE WHEN excluded.removed_at IS NULL THEN NULL
			ELSE coalesce(workspaces.removed_at, excluded.removed_at) END
	RETURNING ` + rawCols
)

const (
	storeRows    = 10_000
	storeUpserts = 2_000
	storeRounds  = 3 // alternations of db and raw; the best of each counts
)

// benchStoreVsSQLite lists 10k workspaces and upserts existing ones
// through the db package and through raw modernc.org/sqlite running the
// same statements with the same pragmas on the same file, alternating.
func benchStoreVsSQLite() error {
	dir, err := os.MkdirTemp("", "companion-bench-store-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := seedDataDir(dir, storeRows); err != nil {
		return err
	}
	path := filepath.Join(dir, "companion.db")
	var dbList, rawListT, dbUps, rawUps time.Duration
	keep := func(best *time.Duration, d time.Duration) {
		if *best == 0 || d < *best {
			*best = d
		}
	}
	for range storeRounds {
		l, u, err := viaDB(path)
		if err != nil {
			return err
		}
		keep(&dbList, l)
		keep(&dbUps, u)
		if l, u, err = viaRaw(path); err != nil {
			return err
		}
		keep(&rawListT, l)
		keep(&rawUps, u)
	}
	dl, rl := ms(dbList), ms(rawListT)
	emit(figure{Name: "store.db_list_10k_workspaces", Value: dl, Unit: "ms",
		Baseline: "store.raw_sqlite_list_10k_workspaces", BaselineValue: rl, Ratio: dl / rl,
		Goal: "ratio <= 1.5", Met: met(dl/rl <= 1.5)})
	emit(figure{Name: "store.raw_sqlite_list_10k_workspaces", Value: rl, Unit: "ms"})
	du, ru := storeUpserts/dbUps.Seconds(), storeUpserts/rawUps.Seconds()
	emit(figure{Name: "store.db_upserts_per_second", Value: du, Unit: "upserts/s",
		Baseline: "store.raw_sqlite_upserts_per_second", BaselineValue: ru, Ratio: du / ru,
		Goal: "ratio >= 0.667 (within 1.5x of raw)", Met: met(ru/du <= 1.5)})
	emit(figure{Name: "store.raw_sqlite_upserts_per_second", Value: ru, Unit: "upserts/s"})
	return nil
}

// viaDB times one ListWorkspaces and storeUpserts SaveWorkspace calls.
func viaDB(path string) (list, ups time.Duration, err error) {
	ctx := context.Background()
	s, err := db.Open(ctx, path)
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	began := time.Now()
	l, err := s.ListWorkspaces(ctx)
	list = time.Since(began)
	if err != nil || len(l) != storeRows {
		return 0, 0, fmt.Errorf("db list: %d workspaces, %v", len(l), err)
	}
	began = time.Now()
	for i := range storeUpserts {
		if _, err := s.SaveWorkspace(ctx, benchWorkspace(i*(storeRows/storeUpserts))); err != nil {
			return 0, 0, err
		}
	}
	return list, time.Since(began), nil
}

// viaRaw does the same with database/sql and the driver alone: the same
// connection setup as db (one writer with BEGIN IMMEDIATE, a read pool
// with query_only), the same statements prepared once, values scanned
// into plain column types without building workspaces.
func viaRaw(path string) (list, ups time.Duration, err error) {
	dsn := func(readOnly bool) string {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(5000)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Add("_pragma", "cache_size(-8192)")
		if readOnly {
			q.Add("_pragma", "query_only(1)")
		} else {
			q.Set("_txlock", "immediate")
		}
		return (&url.URL{Scheme: "file", Path: path}).String() + "?" + q.Encode()
	}
	w, err := sql.Open("sqlite", dsn(false))
	if err != nil {
		return 0, 0, err
	}
	defer w.Close()
	w.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", dsn(true))
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	sel, err := r.Prepare(rawList)
	if err != nil {
		return 0, 0, err
	}
	defer sel.Close()
	bump, err := w.Prepare(rawBumpRev)
	if err != nil {
		return 0, 0, err
	}
	defer bump.Close()
	up, err := w.Prepare(rawUpsert)
	if err != nil {
		return 0, 0, err
	}
	defer up.Close()

	began := time.Now()
	n, err := rawScanAll(sel)
	list = time.Since(began)
	if err != nil || n != storeRows {
		return 0, 0, fmt.Errorf("raw list: %d rows, %v", n, err)
	}
	began = time.Now()
	for i := range storeUpserts {
		if err := rawSave(w, bump, up, i*(storeRows/storeUpserts)); err != nil {
			return 0, 0, fmt.Errorf("raw upsert: %w", err)
		}
	}
	return list, time.Since(began), nil
}

type rawRow struct {
	id, owner, name, account, provider, boxID, boxURL, errText string
	stopReason                                                 string
	state, sizeSource, options                                 sql.NullString
	adopted, keep                                              bool
	idle, ttl, rev                                             int64
	sizeBytes, pausedAt, activity, sizeAt, deleteAfter         sql.NullInt64
	created, updated, removed, exitCode                        sql.NullInt64
}

func (x *rawRow) dest() []any {
	return []any{&x.id, &x.owner, &x.name, &x.account, &x.provider, &x.state, &x.boxID, &x.boxURL, &x.adopted,
		&x.idle, &x.ttl, &x.options, &x.pausedAt, &x.activity,
		&x.sizeBytes, &x.sizeSource, &x.sizeAt, &x.keep, &x.deleteAfter, &x.errText,
		&x.created, &x.updated, &x.rev, &x.removed, &x.stopReason, &x.exitCode}
}

func rawScanAll(sel *sql.Stmt) (int, error) {
	rows, err := sel.Query()
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var out []rawRow
	for rows.Next() {
		var x rawRow
		if err := rows.Scan(x.dest()...); err != nil {
			return 0, err
		}
		out = append(out, x)
	}
	return len(out), rows.Err()
}

// rawSave writes benchWorkspace(i) as db.SaveWorkspace would: the next
// revision and the row, in one IMMEDIATE transaction.
func rawSave(w *sql.DB, bump, up *sql.Stmt, i int) error {
	ws := benchWorkspace(i)
	now := time.Now().UnixNano()
	tx, err := w.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var rev int64
	if err := tx.Stmt(bump).QueryRow().Scan(&rev); err != nil {
		return err
	}
	var x rawRow
	err = tx.Stmt(up).QueryRow(ws.ID, ws.Owner, ws.Name, ws.AccountID, ws.Provider, string(ws.State), ws.BoxID, ws.BoxURL, ws.Adopted,
		int64(ws.Lifecycle.IdlePauseAfter), int64(ws.Lifecycle.PausedTTL), `{"image":"ghcr.io/canvasapp/agent-server:latest"}`,
		ws.PausedAt.UnixNano(), ws.LastActivityAt.UnixNano(), ws.Size.Bytes, string(ws.Size.Source), ws.Size.At.UnixNano(),
		ws.Keep, nil, ws.Error, ws.CreatedAt.UnixNano(), now, rev, nil, string(ws.StopReason), nil).Scan(x.dest()...)
	if err != nil {
		return err
	}
	return tx.Commit()
}
