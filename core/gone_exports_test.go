package core_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
)

// countingExports is an export store that counts the owner pages it
// serves and the records in them.
type countingExports struct {
	core.ExportStore
	mu           sync.Mutex
	calls, rows  int
	largestLimit int
}

func (c *countingExports) ListOwnerExports(ctx context.Context, owner, before string, limit int) ([]core.ExportRecord, error) {
	list, err := c.ExportStore.ListOwnerExports(ctx, owner, before, limit)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.rows += len(list)
	c.largestLimit = max(c.largestLimit, limit)
	return list, err
}

func (c *countingExports) take() (calls, rows, largest int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, rows, largest = c.calls, c.rows, c.largestLimit
	c.calls, c.rows, c.largestLimit = 0, 0, 0
	return
}

// goneSvc is a service over a real SQLite store whose export reads are
// counted.
func goneSvc(t *testing.T) (*core.Service, *db.Store, *countingExports) {
	t.Helper()
	ctx := context.Background()
	st, err := db.Open(ctx, filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ce := &countingExports{ExportStore: st}
	svc, err := core.NewService(ctx, core.Config{Store: st, Exports: ce, Providers: &core.Registry{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	return svc, st, ce
}

var goneEpoch = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// putExport records a running export of workspace ws by owner, made at
// minute m.
func putExport(t testing.TB, st *db.Store, id, owner, ws string, m int) core.ExportRecord {
	t.Helper()
	at := goneEpoch.Add(time.Duration(m) * time.Minute)
	r := core.ExportRecord{ID: id, WorkspaceID: ws, Owner: owner, WorkspaceName: "name of " + ws, Provider: "docker",
		AccountID: "local-docker", CreatedAt: at, UpdatedAt: at, State: core.ExportRunning, Files: []core.ExportFile{}}
	if err := st.PutExport(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func liveWorkspace(t testing.TB, svc *core.Service, id, owner string) core.Workspace {
	t.Helper()
	ws, err := svc.Feed().Save(context.Background(), core.Workspace{ID: id, Owner: owner, Name: id, AccountID: "local-docker",
		Provider: "docker", State: core.StateRunning, CreatedAt: goneEpoch})
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func exportIDs(l []core.ExportRecord) []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.ID
	}
	return out
}

// TestGoneExports: the list holds the owner's exports whose workspace is
// not a live workspace of theirs (never seen, deleted to a tombstone, or
// handed to someone else), newest first; a live workspace's exports and
// other owners' never show.
func TestGoneExports(t *testing.T) {
	ctx := context.Background()
	svc, st, _ := goneSvc(t)
	liveWorkspace(t, svc, "ws_live", "alice")
	deleted := liveWorkspace(t, svc, "ws_deleted", "alice")
	liveWorkspace(t, svc, "ws_bobs", "bob")
	putExport(t, st, "exp_live", "alice", "ws_live", 1)
	putExport(t, st, "exp_deleted1", "alice", "ws_deleted", 2)
	putExport(t, st, "exp_pruned", "alice", "ws_pruned", 3) // its tombstone is gone too
	putExport(t, st, "exp_handed", "alice", "ws_bobs", 4)   // the workspace is bob's now
	putExport(t, st, "exp_deleted2", "alice", "ws_deleted", 5)
	putExport(t, st, "exp_bob", "bob", "ws_gone_bob", 6)

	list, next, err := svc.GoneExports(ctx, "alice", "", 0)
	if err != nil || next != "" || !reflect.DeepEqual(exportIDs(list), []string{"exp_handed", "exp_pruned"}) {
		t.Fatalf("GoneExports(alice) before the delete = %v, %q, %v; want exp_handed, exp_pruned and no next page", exportIDs(list), next, err)
	}
	if list[0].WorkspaceName != "name of ws_bobs" || list[0].Provider != "docker" || list[0].AccountID != "local-docker" {
		t.Errorf("a gone export lost what it was of: %+v", list[0])
	}

	// Deleted: the workspace's row becomes a tombstone.
	deleted.State, deleted.Removed = core.StateDeleted, true
	if _, err := svc.Feed().Save(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	want := []string{"exp_deleted2", "exp_handed", "exp_pruned", "exp_deleted1"}
	list, next, err = svc.GoneExports(ctx, "alice", "", 0)
	if err != nil || next != "" || !reflect.DeepEqual(exportIDs(list), want) {
		t.Fatalf("GoneExports(alice) = %v, %q, %v; want %v", exportIDs(list), next, err, want)
	}
	// Paged two at a time: the same, with a cursor in between.
	var paged []string
	before := ""
	for range 4 {
		page, next, err := svc.GoneExports(ctx, "alice", before, 2)
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, exportIDs(page)...)
		if next == "" {
			break
		}
		before = next
	}
	if !reflect.DeepEqual(paged, want) {
		t.Errorf("paged by 2: %v, want %v", paged, want)
	}
	// The last page ends the list: no cursor to an empty page.
	if page, next, err := svc.GoneExports(ctx, "alice", "exp_handed", 2); err != nil || next != "" || len(page) != 2 {
		t.Errorf("the last page = %v, %q, %v; want 2 exports and no next", exportIDs(page), next, err)
	}

	if list, _, err := svc.GoneExports(ctx, "bob", "", 0); err != nil || !reflect.DeepEqual(exportIDs(list), []string{"exp_bob"}) {
		t.Errorf("GoneExports(bob) = %v, %v; want his own only", exportIDs(list), err)
	}
	if list, next, err := svc.GoneExports(ctx, "carol", "", 0); err != nil || list == nil || len(list) != 0 || next != "" {
		t.Errorf("GoneExports(carol) = %#v, %q, %v; want an empty list", list, next, err)
	}
	for _, limit := range []int{-1, core.MaxGonePage + 1} {
		if _, _, err := svc.GoneExports(ctx, "alice", "", limit); !core.IsKind(err, core.KindInvalid) {
			t.Errorf("limit %d: %v, want invalid", limit, err)
		}
	}
	if _, _, err := svc.GoneExports(ctx, "alice", "exp_bob", 2); !core.IsKind(err, core.KindInvalid) {
		t.Errorf("another owner's export as the cursor: %v, want invalid", err)
	}
}

// TestGoneExportsReadsAPageNotTheTable: 12,000 exports of 1,200 live
// workspaces and three deleted workspaces with two exports each, at the
// top, in the middle and at the bottom of the list. A page whose gone
// exports are near the top reads one small batch; no call reads more
// than goneScanRows (5,000) records, so a page may come back short (here
// empty) with a cursor; walking every page finds all six in order and
// reads each record once.
func TestGoneExportsReadsAPageNotTheTable(t *testing.T) {
	ctx := context.Background()
	svc, st, counts := goneSvc(t)
	const n = 12000
	for i := range n / 10 {
		liveWorkspace(t, svc, fmt.Sprintf("ws_%04d", i), "alice")
	}
	var gone []string
	for i := range n {
		m := n - i // minute: the list is newest first, so i is the position in it
		switch i {
		case 0, 1, n / 2, n/2 + 1, n - 2, n - 1:
			id := fmt.Sprintf("exp_gone_%05d", i)
			putExport(t, st, id, "alice", fmt.Sprintf("ws_gone_%d", i/(n/2)), m)
			gone = append(gone, id)
		default:
			putExport(t, st, fmt.Sprintf("exp_%05d", i), "alice", fmt.Sprintf("ws_%04d", i%(n/10)), m)
		}
	}
	putExport(t, st, "exp_bob", "bob", "ws_bob_gone", n+1)
	counts.take()

	list, next, err := svc.GoneExports(ctx, "alice", "", 2)
	calls, rows, largest := counts.take()
	if err != nil || !reflect.DeepEqual(exportIDs(list), gone[:2]) || next != gone[1] {
		t.Fatalf("the first page of 2 = %v, %q, %v; want %v and a cursor", exportIDs(list), next, err, gone[:2])
	}
	if calls != 1 || rows > 64 {
		t.Errorf("the first page of 2 read %d records in %d calls; want one batch of at most 64", rows, calls)
	}
	if largest > core.MaxGonePage {
		t.Errorf("asked the store for %d records at once, more than %d", largest, core.MaxGonePage)
	}

	var found []string
	pages, short := 0, 0
	before, total := "", 0
	for {
		page, next, err := svc.GoneExports(ctx, "alice", before, 100)
		if err != nil {
			t.Fatal(err)
		}
		_, rows, largest := counts.take()
		total += rows
		if rows > 5000 {
			t.Errorf("page %d read %d records, more than the 5,000 a call may", pages, rows)
		}
		if largest > core.MaxGonePage {
			t.Errorf("page %d asked the store for %d records at once", pages, largest)
		}
		pages++
		if len(page) < 100 && next != "" {
			short++
		}
		found = append(found, exportIDs(page)...)
		if next == "" {
			break
		}
		if pages > 10 {
			t.Fatalf("still paging after %d pages (next %q)", pages, next)
		}
		before = next
	}
	if !reflect.DeepEqual(found, gone) {
		t.Errorf("every page together = %v, want %v", found, gone)
	}
	if short == 0 {
		t.Errorf("no page stopped short at the read bound: the walk read %d records in %d pages", total, pages)
	}
	if total > n+pages {
		t.Errorf("the walk read %d records for a list of %d: records were read again", total, n)
	}
	t.Logf("%d pages, %d records read, %d short pages", pages, total, short)
}

// failingList is a store whose workspaces cannot be read.
type failingList struct{ *db.Store }

func (failingList) ListWorkspaces(context.Context) ([]core.Workspace, error) {
	return nil, errors.New("disk on fire")
}

// TestGoneExportsNeedTheWorkspaces: with the workspaces not loaded every
// export would look gone; GoneExports fails instead.
func TestGoneExportsNeedTheWorkspaces(t *testing.T) {
	ctx := context.Background()
	st, err := db.Open(ctx, filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	putExport(t, st, "exp_1", "alice", "ws_live", 1)
	svc, err := core.NewService(ctx, core.Config{Store: failingList{st}, Exports: st, Providers: &core.Registry{}, DeferLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	if err := svc.Load(ctx); err == nil {
		t.Fatal("Load succeeded without the workspaces")
	}
	if list, _, err := svc.GoneExports(ctx, "alice", "", 0); err == nil {
		t.Fatalf("GoneExports without the workspaces = %v, want an error", exportIDs(list))
	}
}
