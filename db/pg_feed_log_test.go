package db_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"

	"github.com/jackc/pgx/v5"
)

// TestFeedStreamsEveryRevisionOfAnotherReplica is the gap once seen with
// two replicas: A saved one workspace twice (revisions 13 and 15 there)
// before B read A's changes, and B's clients got only the second. With the
// feed log, B applies and publishes both, and the revisions of other
// workspaces in between, each once and in order.
func TestFeedStreamsEveryRevisionOfAnotherReplica(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openReplica(t, url), openReplica(t, url) // B reads only when told
	_, _, sub := b.feed.SubscribeSnapshot(64)
	defer sub.Close()

	var want []string
	save := func(ws core.Workspace) {
		t.Helper()
		saved, err := a.feed.Save(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%s@%d:%s", saved.ID, saved.Rev, saved.State))
	}
	save(core.Workspace{ID: "ws_busy", State: core.StateCreating})
	save(core.Workspace{ID: "ws_other", State: core.StateRunning})
	save(core.Workspace{ID: "ws_busy", State: core.StateRunning})
	save(core.Workspace{ID: "ws_busy", State: core.StatePausing})
	save(core.Workspace{ID: "ws_busy", State: core.StatePaused})
	if err := b.feed.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < len(want) {
		ch := next(t, sub)
		got = append(got, fmt.Sprintf("%s@%d:%s", ch.Workspace.ID, ch.Rev, ch.Workspace.State))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("B's subscriber got\n  %s\nwant every revision A saved\n  %s", strings.Join(got, " "), strings.Join(want, " "))
	}

	// A client of B reconnecting with ?since= gets them all too.
	changes, _, complete, sub2, err := b.feed.SubscribeSince(ctx, 0, 4)
	if err != nil || !complete {
		t.Fatalf("SubscribeSince(0): complete %v, %v", complete, err)
	}
	sub2.Close()
	got = got[:0]
	for _, ch := range changes {
		got = append(got, fmt.Sprintf("%s@%d:%s", ch.Workspace.ID, ch.Rev, ch.Workspace.State))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("SubscribeSince(0) on B = %s, want %s", strings.Join(got, " "), strings.Join(want, " "))
	}
}

// TestFeedLogPruned: revisions older than the log's ten minutes are cut,
// as a prefix; a catch-up from before the cut gets the latest revision of
// each workspace (complete), one from after it every revision.
func TestFeedLogPruned(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	s := openPGStore(t, url)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	db.SetPGClock(s, func() time.Time { return now })
	for i := range 4 { // revisions 1-4 at 12:00
		if _, err := s.SaveWorkspace(ctx, core.Workspace{ID: fmt.Sprintf("ws_%d", i%2), Name: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(20 * time.Minute)
	for i := range 2 { // revisions 5-6 at 12:20
		if _, err := s.SaveWorkspace(ctx, core.Workspace{ID: "ws_0", Name: fmt.Sprint(4 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PruneTombstones(ctx, now.Add(-time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	if n := db.CountRows(t, s, "feed_log"); n != 2 {
		t.Fatalf("feed log holds %d revisions after the prune, want 2 (5 and 6)", n)
	}
	check := func(since int64, want string) {
		t.Helper()
		changes, rev, complete, err := s.Changes(ctx, since)
		if err != nil || !complete || rev != 6 {
			t.Fatalf("Changes(%d): rev %d, complete %v, %v", since, rev, complete, err)
		}
		var got []string
		for _, ws := range changes {
			got = append(got, fmt.Sprintf("%s@%d", ws.ID, ws.Rev))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("Changes(%d) = %s, want %s", since, strings.Join(got, " "), want)
		}
	}
	check(4, "ws_0@5 ws_0@6") // the log
	check(3, "ws_1@4 ws_0@6") // before the log: the workspaces table
	check(0, "ws_1@4 ws_0@6")
}

// TestFeedLogColumns: the log has every column of workspaces, so a
// migration that adds one to workspaces and forgets the log fails here
// (and the logging insert would fail at once).
func TestFeedLogColumns(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	openPGStore(t, url) // migrates
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	cols := func(table string) string {
		var list string
		if err := conn.QueryRow(ctx, `SELECT string_agg(column_name || ' ' || data_type || ' ' || is_nullable, ', ' ORDER BY column_name)
			FROM information_schema.columns WHERE table_name = $1`, table).Scan(&list); err != nil {
			t.Fatal(err)
		}
		return list
	}
	if w, l := cols("workspaces"), cols("feed_log"); w != l {
		t.Fatalf("feed_log's columns differ from workspaces'\n workspaces: %s\n feed_log:   %s", w, l)
	}
}
