package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/providers/wasm"
	"github.com/canvasapp/companion/secrets"
)

// serverStore is what serve and desktop need of a store; both engines
// (db.Store on SQLite, db.PGStore on PostgreSQL) provide it.
type serverStore interface {
	core.Store
	core.AuditLog
	core.ExportStore
	wasm.PinStore
	secrets.SealedRows
	auth.Store
	core.RetentionStore
	core.RestoreStore
	// Ready tells readiness probes whether the store answers with every
	// migration done.
	Ready(ctx context.Context) error
	Close() error
}

var (
	_ serverStore = (*db.Store)(nil)
	_ serverStore = (*db.PGStore)(nil)
)

// databaseFlags choose serve's engine: SQLite in the data dir (the
// default), or PostgreSQL by URL.
type databaseFlags struct {
	url  string
	file string
}

func (d *databaseFlags) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&d.url, "database", "", "serve only: PostgreSQL `URL` (postgres://user:password@host:port/dbname) to keep state in instead of SQLite in --data-dir, so several serve replicas can share it; prefer --database-file, since other users can read command lines")
	fs.StringVar(&d.file, "database-file", "", "serve only: `file` holding the PostgreSQL URL (mode 0600), instead of --database")
}

// sqlite says whether the store is SQLite in the data dir (no PostgreSQL
// URL is configured).
func (d *databaseFlags) sqlite() bool { return d.url == "" && d.file == "" }

// sqlitePath is the SQLite store's file in dataDir.
func sqlitePath(dataDir string) string { return filepath.Join(dataDir, "companion.db") }

// resolve returns the PostgreSQL URL the flags name, or "" for SQLite.
func (d *databaseFlags) resolve() (string, error) {
	if d.url != "" && d.file != "" {
		return "", fmt.Errorf("give --database or --database-file, not both")
	}
	u := d.url
	if d.file != "" {
		b, err := os.ReadFile(d.file)
		if err != nil {
			return "", fmt.Errorf("read --database-file: %w", err)
		}
		u = strings.TrimSpace(string(b))
	}
	if u != "" && !db.IsPostgresURL(u) {
		return "", fmt.Errorf("--database must be a postgres:// or postgresql:// URL (SQLite needs no flag: it lives in --data-dir)")
	}
	return u, nil
}

// openServerStore opens PostgreSQL when a URL is configured, else the
// SQLite file in the data dir.
func openServerStore(ctx context.Context, f *serverFlags) (serverStore, error) {
	u, err := f.database.resolve()
	if err != nil {
		return nil, err
	}
	if u == "" {
		return db.Open(ctx, sqlitePath(f.dataDir))
	}
	return db.OpenPostgres(ctx, u)
}

// instanceRows is a store's instance id and its sealed secret rows.
type instanceRows interface {
	InstanceID(ctx context.Context) (string, error)
	secrets.SealedRows
}

// checkMode refuses PostgreSQL on the desktop: a desktop keeps its state
// in SQLite next to it, and PostgreSQL is for several serve replicas.
func (d *databaseFlags) checkMode(m mode) error {
	if m == modeDesktop && (d.url != "" || d.file != "") {
		return fmt.Errorf("companion desktop keeps its state in SQLite in --data-dir only; --database and --database-file are for companion serve")
	}
	return nil
}
