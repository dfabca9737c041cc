package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

func init() { Cases["OwnerExports"] = ownerExports }

// ownerExports: ListOwnerExports pages one owner's records newest first,
// ties in created_at broken by id in byte order (as the workspace list
// does), every record once whatever the page size; another owner's
// records never show, and neither their ids nor unknown ones are
// accepted as a cursor.
func ownerExports(t *testing.T, e Engine) {
	ctx := context.Background()
	s, reopen, _ := open(t, e)
	put := func(id, owner string, at time.Time) core.ExportRecord {
		t.Helper()
		r := core.ExportRecord{ID: id, WorkspaceID: "ws_" + id, Owner: owner, WorkspaceName: "name of " + id,
			Provider: "docker", AccountID: "local-docker", CreatedAt: at, UpdatedAt: at, State: core.ExportRunning,
			Files: []core.ExportFile{}}
		if err := s.PutExport(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	at := func(m int) time.Time { return epoch.Add(time.Duration(m) * time.Minute) }
	// u's records, newest first as the store must give them: three made
	// in the same nanosecond, in byte order of id ("exp_B" < "exp_a" <
	// "exp_b"; a locale's collation would put B between a and b).
	want := []core.ExportRecord{
		put("exp_9", "u", at(9)),
		put("exp_b", "u", at(5)), put("exp_a", "u", at(5)), put("exp_B", "u", at(5)),
		put("exp_3", "u", at(3)),
		put("exp_1", "u", at(1)),
		put("exp_0", "u", at(0)),
	}
	for i := range 5 {
		put("exp_v"+string(rune('0'+i)), "v", at(2*i)) // interleaved, another owner's
	}
	ids := func(l []core.ExportRecord) []string {
		out := make([]string, len(l))
		for i, r := range l {
			out[i] = r.ID
		}
		return out
	}

	for _, st := range []Store{s, reopen()} {
		all := must(st.ListOwnerExports(ctx, "u", "", 100))
		if !reflect.DeepEqual(all, want) {
			t.Fatalf("ListOwnerExports(u) = %v, want %v", ids(all), ids(want))
		}
		for _, size := range []int{1, 2, 3} {
			var got []core.ExportRecord
			before := ""
			for range len(want) + 1 {
				page := must(st.ListOwnerExports(ctx, "u", before, size))
				if len(page) > size {
					t.Fatalf("page of %d holds %d", size, len(page))
				}
				got = append(got, page...)
				if len(page) < size {
					break
				}
				before = page[len(page)-1].ID
			}
			if !reflect.DeepEqual(ids(got), ids(want)) {
				t.Errorf("pages of %d = %v, want %v", size, ids(got), ids(want))
			}
		}
		if rest := must(st.ListOwnerExports(ctx, "u", "exp_a", 2)); !reflect.DeepEqual(ids(rest), []string{"exp_B", "exp_3"}) {
			t.Errorf("older than exp_a = %v, want exp_B (its tie) then exp_3", ids(rest))
		}
		if none := must(st.ListOwnerExports(ctx, "u", "exp_0", 5)); none == nil || len(none) != 0 {
			t.Errorf("older than the oldest = %#v, want an empty list", none)
		}
		if none := must(st.ListOwnerExports(ctx, "nobody", "", 5)); none == nil || len(none) != 0 {
			t.Errorf("ListOwnerExports(nobody) = %#v, want an empty list", none)
		}
		for _, bad := range []string{"exp_v1", "exp_unknown"} {
			_, err := st.ListOwnerExports(ctx, "u", bad, 5)
			wantKind(t, "a cursor of "+bad, err, core.KindInvalid)
		}
		_, err := st.ListOwnerExports(ctx, "u", "", 0)
		wantKind(t, "limit 0", err, core.KindInvalid)
	}
}
