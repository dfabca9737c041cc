package db_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
)

// fullWorkspace sets every field to a non-zero value.
func fullWorkspace(id string) core.Workspace {
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)
	return core.Workspace{
		ID:             id,
		Owner:          "user_7",
		Name:           "feature branch ✓",
		AccountID:      "acc_1",
		Provider:       "docker",
		State:          core.StatePaused,
		BoxID:          "box-123",
		BoxURL:         "http://127.0.0.1:43123",
		Adopted:        true,
		Lifecycle:      core.Lifecycle{IdlePauseAfter: 15 * time.Minute, PausedTTL: 7 * 24 * time.Hour},
		Options:        map[string]string{"image": "agent:latest", "region": "fra1", "quote": `"x"`},
		PausedAt:       at.Add(time.Hour),
		LastActivityAt: at.Add(30 * time.Minute),
		Size:           &core.Size{Bytes: 1 << 40, Source: core.SizeDockerEngineUsed, At: at.Add(2 * time.Hour)},
		Keep:           true,
		DeleteAfter:    at.Add(30 * 24 * time.Hour),
		Error:          "resume failed: rate limited",
		CreatedAt:      at,
	}
}

func TestWorkspaceRoundTripEveryField(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	now := time.Date(2025, 6, 1, 12, 0, 0, 42, time.UTC)
	newClock(s, now)

	in := fullWorkspace("ws_full")
	saved := save(t, s, in)
	want := in
	want.Rev, want.UpdatedAt = saved.Rev, now
	if !reflect.DeepEqual(saved, want) {
		t.Fatalf("SaveWorkspace returned\n%+v\nwant\n%+v", saved, want)
	}
	if saved.Rev != 1 {
		t.Errorf("first revision = %d, want 1", saved.Rev)
	}
	got, err := s.GetWorkspace(ctx, "ws_full")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetWorkspace =\n%+v\nwant\n%+v", got, want)
	}

	// And from a fresh process.
	s.Close()
	s2 := openAt(t, path)
	defer s2.Close()
	list, err := s2.ListWorkspaces(ctx)
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0], want) {
		t.Fatalf("ListWorkspaces after reopen = %+v, %v", list, err)
	}
}

func TestWorkspaceZeroValuesRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	for _, in := range []core.Workspace{
		{ID: "ws_zero"}, // nil Size, nil Options, zero times
		{ID: "ws_empty", Options: map[string]string{}},                  // empty, not nil
		{ID: "ws_size0", Size: &core.Size{}},                            // a zero size is still a size
		{ID: "ws_epoch", CreatedAt: time.Unix(0, 0).UTC(), Keep: false}, // 1970 is not the zero time
	} {
		saved := save(t, s, in)
		got, err := s.GetWorkspace(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := in
		want.Rev, want.UpdatedAt = saved.Rev, saved.UpdatedAt
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got\n%#v\nwant\n%#v", in.ID, got, want)
		}
		if (got.Options == nil) != (in.Options == nil) || (got.Size == nil) != (in.Size == nil) {
			t.Errorf("%s: nil-ness changed: options %v size %v", in.ID, got.Options, got.Size)
		}
		if !got.PausedAt.IsZero() || !got.DeleteAfter.IsZero() || !got.LastActivityAt.IsZero() {
			t.Errorf("%s: zero time did not round-trip", in.ID)
		}
	}
}

func TestWorkspaceTimesComeBackUTC(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	zone := time.FixedZone("X", 5*3600+1800)
	local := time.Date(2025, 1, 2, 3, 4, 5, 6, zone)
	save(t, s, core.Workspace{ID: "ws_tz", PausedAt: local, CreatedAt: time.Now()}) // time.Now has a monotonic reading
	got, err := s.GetWorkspace(ctx, "ws_tz")
	if err != nil {
		t.Fatal(err)
	}
	if !got.PausedAt.Equal(local) || got.PausedAt.Location() != time.UTC {
		t.Fatalf("PausedAt = %v, want %v in UTC", got.PausedAt, local)
	}
	if got.UpdatedAt.Location() != time.UTC || got.UpdatedAt.IsZero() {
		t.Fatalf("UpdatedAt = %v, want now in UTC", got.UpdatedAt)
	}
}

func TestWorkspaceTimeOutOfRangeRefused(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	before := currentRev(t, s)
	_, err := s.SaveWorkspace(ctx, core.Workspace{ID: "ws_far", DeleteAfter: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)})
	wantKind(t, err, core.KindInvalid)
	if _, err := s.GetWorkspace(ctx, "ws_far"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("refused workspace was stored: %v", err)
	}
	if rev := currentRev(t, s); rev != before {
		t.Fatalf("refused save moved the revision %d -> %d", before, rev)
	}
	_, err = s.SaveWorkspace(ctx, core.Workspace{})
	wantKind(t, err, core.KindInvalid)
}

func TestGetUnknownWorkspace(t *testing.T) {
	s, _ := openTemp(t)
	_, err := s.GetWorkspace(context.Background(), "ws_nope")
	wantKind(t, err, core.KindNotFound)
	if err.Error() != `workspace "ws_nope" not found` {
		t.Fatalf("message = %q", err)
	}
}

func TestSaveReplaces(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	first := save(t, s, fullWorkspace("ws_1"))
	next := first
	next.State, next.Size, next.Options, next.PausedAt, next.Error = core.StateRunning, nil, nil, time.Time{}, ""
	second := save(t, s, next)
	if second.Rev != first.Rev+1 {
		t.Fatalf("revision %d after %d", second.Rev, first.Rev)
	}
	got, _ := s.GetWorkspace(ctx, "ws_1")
	if got.State != core.StateRunning || got.Size != nil || got.Options != nil || !got.PausedAt.IsZero() || got.Error != "" {
		t.Fatalf("replace kept old values: %+v", got)
	}
	if list, _ := s.ListWorkspaces(ctx); len(list) != 1 {
		t.Fatalf("ListWorkspaces has %d entries, want 1", len(list))
	}
}

func TestTombstones(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	save(t, s, core.Workspace{ID: "ws_live", Name: "live"})
	gone := save(t, s, core.Workspace{ID: "ws_gone", Name: "gone", BoxID: "box-9"})
	gone.Removed, gone.State = true, core.StateDeleted
	tomb := save(t, s, gone)
	if !tomb.Removed {
		t.Fatal("saved tombstone lost Removed")
	}

	list, err := s.ListWorkspaces(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "ws_live" {
		t.Fatalf("ListWorkspaces = %+v, %v; want only ws_live", list, err)
	}
	got, err := s.GetWorkspace(ctx, "ws_gone")
	if err != nil || !got.Removed || got.BoxID != "box-9" || got.Rev != tomb.Rev {
		t.Fatalf("GetWorkspace(tombstone) = %+v, %v", got, err)
	}
	changes, _, complete, err := s.Changes(ctx, tomb.Rev-1)
	if err != nil || !complete || len(changes) != 1 || !changes[0].Removed {
		t.Fatalf("Changes = %+v, %v, %v; want the tombstone", changes, complete, err)
	}
}

func TestRevisionsUnderConcurrency(t *testing.T) {
	const writers, each = 16, 40
	ctx := context.Background()
	s, path := openTemp(t)

	var (
		mu   sync.Mutex
		revs []int64
		wg   sync.WaitGroup
		errs = make(chan error, writers*each+100)
	)
	stop := make(chan struct{})
	// Readers run alongside: WAL readers must neither fail nor block writers.
	var rwg sync.WaitGroup
	for range 3 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.ListWorkspaces(ctx); err != nil {
					errs <- err
					return
				}
				if _, _, _, err := s.Changes(ctx, 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ws := core.Workspace{ID: fmt.Sprintf("ws_%d_%d", w, i%5), Name: fmt.Sprint(i), State: core.StateRunning}
				saved, err := s.SaveWorkspace(ctx, ws)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				revs = append(revs, saved.Rev)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent use failed: %v", err)
	}
	checkContiguous(t, revs, 1)
	total := int64(writers * each)
	if rev := currentRev(t, s); rev != total {
		t.Fatalf("current revision %d, want %d", rev, total)
	}

	// The counter continues after a restart.
	s.Close()
	s2 := openAt(t, path)
	defer s2.Close()
	if rev := currentRev(t, s2); rev != total {
		t.Fatalf("revision after reopen %d, want %d", rev, total)
	}
	if saved := save(t, s2, core.Workspace{ID: "ws_after"}); saved.Rev != total+1 {
		t.Fatalf("first revision after reopen %d, want %d", saved.Rev, total+1)
	}
}

// TestTwoStoresOnOneFile stands in for two processes sharing a data dir:
// each has its own write connection, so they meet at SQLite's file lock.
// BEGIN IMMEDIATE plus the busy timeout must serialise them without
// SQLITE_BUSY and without duplicate revisions.
func TestTwoStoresOnOneFile(t *testing.T) {
	ctx := context.Background()
	a, path := openTemp(t)
	b := openAt(t, path)
	defer b.Close()
	var (
		mu   sync.Mutex
		revs []int64
		wg   sync.WaitGroup
	)
	errs := make(chan error, 200)
	for i, s := range []*db.Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				saved, err := s.SaveWorkspace(ctx, core.Workspace{ID: fmt.Sprintf("ws_%d_%d", i, j)})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				revs = append(revs, saved.Rev)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("save failed: %v", err)
	}
	checkContiguous(t, revs, 1)
}

func checkContiguous(t *testing.T, revs []int64, from int64) {
	t.Helper()
	sort.Slice(revs, func(i, j int) bool { return revs[i] < revs[j] })
	for i, r := range revs {
		if r != from+int64(i) {
			t.Fatalf("revisions are not contiguous from %d: position %d holds %d (duplicate or gap)", from, i, r)
		}
	}
}

func TestCancelledSaveLeavesNoGap(t *testing.T) {
	s, _ := openTemp(t)
	save(t, s, core.Workspace{ID: "ws_1"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.SaveWorkspace(ctx, core.Workspace{ID: "ws_2"}); err == nil {
		t.Fatal("save with a cancelled context succeeded")
	}
	if saved := save(t, s, core.Workspace{ID: "ws_3"}); saved.Rev != 2 {
		t.Fatalf("revision after a cancelled save = %d, want 2", saved.Rev)
	}
}

func TestChanges(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)

	changes, rev, complete, err := s.Changes(ctx, 0)
	if err != nil || !complete || rev != 0 || len(changes) != 0 {
		t.Fatalf("empty store: Changes(0) = %v, %d, %v, %v", changes, rev, complete, err)
	}

	save(t, s, core.Workspace{ID: "a"})                  // 1
	save(t, s, core.Workspace{ID: "b"})                  // 2
	save(t, s, core.Workspace{ID: "a", Name: "a again"}) // 3
	save(t, s, core.Workspace{ID: "c"})                  // 4

	ids := func(ws []core.Workspace) (out []string) {
		for _, w := range ws {
			out = append(out, fmt.Sprintf("%s@%d", w.ID, w.Rev))
		}
		return out
	}
	for _, c := range []struct {
		since    int64
		want     []string
		complete bool
	}{
		{0, []string{"b@2", "a@3", "c@4"}, true}, // each workspace once, at its latest revision
		{2, []string{"a@3", "c@4"}, true},
		{3, []string{"c@4"}, true},
		{4, nil, true},
		{5, nil, false}, // from the future: the client must resnapshot
		{1 << 62, nil, false},
		{-1, nil, false},
	} {
		changes, rev, complete, err := s.Changes(ctx, c.since)
		if err != nil {
			t.Fatal(err)
		}
		if rev != 4 || complete != c.complete || !reflect.DeepEqual(ids(changes), c.want) {
			t.Errorf("Changes(%d) = %v, rev %d, complete %v; want %v, rev 4, complete %v", c.since, ids(changes), rev, complete, c.want, c.complete)
		}
	}
}

func TestPruneTombstones(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := newClock(s, t0)

	save(t, s, core.Workspace{ID: "live_old"}) // rev 1, never pruned
	tombRev := map[string]int64{}
	for i := range 5 {
		clk.set(t0.Add(time.Duration(i+1) * time.Hour))
		id := fmt.Sprintf("t%d", i)
		save(t, s, core.Workspace{ID: id})
		tombRev[id] = save(t, s, core.Workspace{ID: id, Removed: true}).Rev
	}
	// rev: live_old 1, t0 3, t1 5, t2 7, t3 9, t4 11
	save(t, s, core.Workspace{ID: "live_new"}) // 12
	if err := s.PutPlan(ctx, core.DeletePlan{TokenHash: "h-t0", WorkspaceID: "t0", ExpiresAt: t0.Add(100 * time.Hour)}); err != nil {
		t.Fatal(err)
	}

	exists := func(id string) bool {
		_, err := s.GetWorkspace(ctx, id)
		return err == nil
	}

	// Removed before t0+3h: t0 (1h) and t1 (2h).
	if err := s.PruneTombstones(ctx, t0.Add(3*time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"t0": false, "t1": false, "t2": true, "t3": true, "t4": true, "live_old": true, "live_new": true} {
		if exists(id) != want {
			t.Errorf("after prune by age: %s exists = %v, want %v", id, !want, want)
		}
	}
	floor := tombRev["t1"]
	if _, _, complete, _ := s.Changes(ctx, floor-1); complete {
		t.Errorf("Changes(%d) below the floor reported complete", floor-1)
	}
	changes, rev, complete, err := s.Changes(ctx, floor)
	if err != nil || !complete || rev != 12 || len(changes) != 4 {
		t.Errorf("Changes(floor=%d) = %d changes, rev %d, complete %v, %v; want 4, 12, true", floor, len(changes), rev, complete, err)
	}
	// The plan of a pruned workspace went with it.
	if _, err := s.TakePlan(ctx, "h-t0", "t0", t0); !core.IsKind(err, core.KindNotFound) {
		t.Errorf("plan of a pruned workspace: %v", err)
	}

	// Keep only the newest tombstone, whatever its age.
	if err := s.PruneTombstones(ctx, time.Time{}, 1); err != nil {
		t.Fatal(err)
	}
	if exists("t2") || exists("t3") || !exists("t4") {
		t.Errorf("keep=1 should leave only t4: t2 %v t3 %v t4 %v", exists("t2"), exists("t3"), exists("t4"))
	}
	floor = tombRev["t3"]
	if _, _, complete, _ := s.Changes(ctx, floor-1); complete {
		t.Error("floor did not move to the newest pruned tombstone")
	}

	// Pruning nothing never lowers the floor.
	if err := s.PruneTombstones(ctx, t0, 100); err != nil {
		t.Fatal(err)
	}
	if _, _, complete, _ := s.Changes(ctx, floor-1); complete {
		t.Error("floor went back after an empty prune")
	}

	// The floor survives a restart, and keep=0 drops every tombstone.
	s.Close()
	s2 := openAt(t, path)
	defer s2.Close()
	if _, _, complete, _ := s2.Changes(ctx, floor-1); complete {
		t.Error("floor lost on reopen")
	}
	if err := s2.PruneTombstones(ctx, time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.GetWorkspace(ctx, "t4"); !core.IsKind(err, core.KindNotFound) {
		t.Errorf("keep=0 left t4: %v", err)
	}
	if _, _, complete, _ := s2.Changes(ctx, tombRev["t4"]-1); complete {
		t.Error("floor did not reach t4")
	}
	if list, _ := s2.ListWorkspaces(ctx); len(list) != 2 {
		t.Errorf("live workspaces after pruning: %d, want 2", len(list))
	}
}

func TestResavedTombstoneKeepsRemovalTime(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := newClock(s, t0)
	save(t, s, core.Workspace{ID: "ws", Removed: true})
	clk.set(t0.Add(48 * time.Hour))
	save(t, s, core.Workspace{ID: "ws", Removed: true, Error: "again"})
	if err := s.PruneTombstones(ctx, t0.Add(time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetWorkspace(ctx, "ws"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("a tombstone re-saved later was not pruned by its first removal time: %v", err)
	}
}
