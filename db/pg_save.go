package db

import (
	"context"
	"fmt"
	"strings"

	"github.com/canvasapp/companion/core"
)

// pgSaveOne is PGStore.SaveWorkspace's single statement: the revision bump
// and the row's upsert, autocommitted. That is one round trip instead of
// four (BEGIN, bump, upsert, COMMIT), most of an action's store time on
// PostgreSQL. The counter row stays locked until the statement commits,
// exactly as in the transaction, so revisions still become visible in
// order. Its arguments are workspaceArgs without the revision.
//
// It also announces the new revision to every replica's feed (see
// WatchChanges); PostgreSQL delivers the notification when the statement
// commits, and not at all if it fails. The notifying CTE is referenced by
// the upsert, so it is always evaluated. The saved row is appended to the
// feed log (pgLogged) in the same statement.
//
// The notification's payload is the revision, followed by the saved
// workspace's progress line when it has one (feedPayloadSuffix): the last
// parameter, after workspaceArgs without the revision.
func pgSaveOne() string {
	return pgLogged(`r AS (`+qBumpRev+`), rn AS (SELECT value FROM r, pg_notify('`+feedChannel+`', value::text || `+
		fmt.Sprintf("$%d::text", pgSaveOneParams)+`))`,
		pgSQLWith(qUpsertWorkspace, revArg, `(SELECT value FROM rn)`))
}

// pgSQLWith is pgSQL with the placeholder at index i (0-based) replaced
// by expr and left out of the numbering.
func pgSQLWith(q string, i int, expr string) string {
	var b strings.Builder
	n, seen := 0, 0
	for _, c := range q {
		if c != '?' {
			b.WriteRune(c)
			continue
		}
		if seen == i {
			b.WriteString(expr)
		} else {
			n++
			fmt.Fprintf(&b, "$%d", n)
		}
		seen++
	}
	return b.String()
}

// pgSaveOneParams is how many parameters pgSaveOne takes: workspaceArgs
// without the revision, then the notification's suffix. A statement built
// on it numbers its own parameters after these.
var pgSaveOneParams = strings.Count(qUpsertWorkspace, "?")

// saveOne runs q, pgSaveOne or a statement built on it, for ws: its
// parameters are pgSaveOne's (pgSaveArgs) followed by extra.
func (s *PGStore) saveOne(ctx context.Context, q, what string, ws core.Workspace, extra ...any) (core.Workspace, error) {
	args, err := workspaceArgsAt(ws, s.now().UTC())
	if err != nil {
		return ws, err
	}
	args = append(append(withoutRev(args), feedPayloadSuffix(ws)), extra...)
	saved, err := scanWorkspace(s.pool.QueryRow(ctx, q, args...))
	if err != nil {
		return ws, s.wrap(what, err)
	}
	return saved, nil
}

// withoutRev drops the revision from workspaceArgs, for pgSaveOne.
func withoutRev(args []any) []any {
	return append(args[:revArg:revArg], args[revArg+1:]...)
}
