package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// The feed log (PostgreSQL only) is every revision a replica saved, as the
// row it saved. Changes reads it when it reaches back far enough, so a
// replica that follows another's writes applies and streams each revision
// of a workspace, not only the latest one the workspaces table still
// holds. SQLite has one process per data dir, whose feed applies every
// save itself, and keeps no log.
//
// The log is contiguous: every statement that bumps the revision logs its
// row in the same statement or transaction, and pruning cuts a prefix.
// Its lowest revision, less one, is therefore the oldest `since` it can
// answer exactly.

// feedLogKeepFor is how long a revision stays in the log: far longer than
// a healthy replica's lag (milliseconds) or a listener's reconnection,
// short enough that the log stays a small multiple of an hour's writes.
// Clients reconnecting from further back get the coalesced changes of the
// workspaces table, as before.
const feedLogKeepFor = 10 * time.Minute

// pgLogged wraps upsert, a statement ending in RETURNING workspaceCols,
// so that it also appends the row it returns to the feed log. upsert may
// begin with a WITH clause of its own, whose queries it keeps.
func pgLogged(with, upsert string) string {
	if with != "" {
		with += ", "
	}
	return `WITH ` + with + `u AS (` + upsert + `), l AS (INSERT INTO feed_log (` + workspaceCols + `) SELECT ` +
		workspaceCols + ` FROM u) SELECT ` + workspaceCols + ` FROM u`
}

// Within a read of Changes: the lowest revision the log can answer from.
// An empty log answers from the head revision on.
const qFeedLogFloor = `SELECT coalesce(min(rev) - 1, $1) FROM feed_log`

// qFeedLogSince is every logged revision after since, in order.
const qFeedLogSince = `SELECT ` + workspaceCols + ` FROM feed_log WHERE rev > $1 ORDER BY rev`

// pruneFeedLog cuts the log's prefix of revisions saved before cutoff.
// It cuts by revision, not by time, so the log stays contiguous even when
// replicas' clocks disagree a little.
func pruneFeedLog(ctx context.Context, tx pgx.Tx, cutoff time.Time) error {
	_, err := tx.Exec(ctx, `DELETE FROM feed_log WHERE rev <= (
		SELECT max(rev) FROM feed_log WHERE updated_at < $1)`, nanos(cutoff))
	return err
}
