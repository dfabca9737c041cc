package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/canvasapp/companion/db"
)

const migrateUsage = `Usage:
  companion migrate sqlite-to-postgres --from DIR (--to URL | --to-file FILE)
      copy the SQLite database of data dir DIR (accounts, workspaces and
      their tombstones, delete previews, the journal, module pins, the
      audit trail, export records and sealed secrets, with the feed and
      audit counters and the instance id) into an empty PostgreSQL
      database, in one transaction, then compare each table's row count
      and SHA-256 on both sides. Stop companion on DIR first. DIR is not
      changed. Afterwards start 'companion serve --database URL' (sealed
      secrets need the same --secret-key-file; modules and the export dir
      stay in --data-dir). Prints one JSON line per table on stdout.
      Exit code 0: copied and verified; 1: failed (the PostgreSQL database
      is left empty when the copy itself failed).
`

func runMigrate(args []string, stdout, stderr io.Writer) int {
	sub, rest, fs, code, ok := subcommand("migrate", migrateUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	from := fs.String("from", "", "the SQLite data `directory` to copy from")
	var to databaseFlags
	fs.StringVar(&to.url, "to", "", "PostgreSQL `URL` to copy into (an empty database)")
	fs.StringVar(&to.file, "to-file", "", "`file` holding the PostgreSQL URL, instead of --to")
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if sub != "sqlite-to-postgres" || fs.NArg() != 0 {
		fmt.Fprintf(stderr, "companion migrate: unknown command or extra arguments %q\n\n%s", args, migrateUsage)
		return 2
	}
	url, err := to.resolve()
	if err == nil && (url == "" || *from == "") {
		err = fmt.Errorf("both --from DIR and --to URL are needed")
	}
	if err != nil {
		fmt.Fprintf(stderr, "companion migrate: %v\n\n%s", err, migrateUsage)
		return 2
	}
	if err := migrateToPostgres(context.Background(), *from, url, stdout); err != nil {
		fmt.Fprintf(stderr, "companion migrate sqlite-to-postgres: %v\n", err)
		return 1
	}
	return 0
}

func migrateToPostgres(ctx context.Context, dir, url string, stdout io.Writer) error {
	path := sqlitePath(dir)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no companion database at %s: %w", path, err)
	}
	// A companion still running on dir would keep writing to SQLite.
	unlock, err := lockDataDir(ctx, dir, 0, nil)
	if err != nil {
		return fmt.Errorf("%w (stop companion on %s before copying it)", err, dir)
	}
	defer unlock()
	src, err := db.Open(ctx, path)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := db.OpenPostgres(ctx, url)
	if err != nil {
		return err
	}
	defer dst.Close()
	report, err := db.CopyToPostgres(ctx, src, dst)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	for _, tc := range report {
		enc.Encode(tc)
	}
	return nil
}
