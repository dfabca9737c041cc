package db

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
)

// A new database does not replay every migration: it runs one script, the
// schema and rows that migrations 1..N leave in an empty file (schema/
// NNNN.sql, N its version, written by TestSchemaSnapshot), and then the
// migrations after N, if any. Replaying them costs a first start several
// milliseconds of CPU: each ALTER TABLE makes SQLite parse the whole
// schema again. TestSchemaSnapshot checks that both ways give the same
// file; a new migration needs no new snapshot (it runs after it), though
// regenerating one keeps first starts fast.
//
//go:embed schema
var snapshotFS embed.FS

// snapshot is the newest schema snapshot, or nil if there is none.
var snapshot = sync.OnceValues(func() (*migration, error) { return loadSnapshot(snapshotFS, "schema/*.sql") })

func loadSnapshot(fsys fs.FS, glob string) (*migration, error) {
	names, err := fs.Glob(fsys, glob)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	var best *migration
	for _, name := range names {
		base := path.Base(name)
		v, err := strconv.Atoi(strings.TrimSuffix(base, ".sql"))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("schema snapshot %s: name must be NNNN.sql", base)
		}
		if best != nil && best.version >= v {
			continue
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		best = &migration{version: v, name: "schema snapshot " + base, sql: string(b)}
	}
	return best, nil
}
