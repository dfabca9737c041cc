package db

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestOwnerExportsUseTheOwnerIndex: both pages of ListOwnerExports are
// range reads of the exports_owner index (owner, created_at), never a
// scan of the table, so a page costs what it returns, not what the table
// holds. (Ties in created_at are sorted by id within the range: SQLite's
// "temp b-tree for right part of ORDER BY".)
func TestOwnerExportsUseTheOwnerIndex(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for q, args := range map[string][]any{
		qOwnerExports:       {"u", 10},
		qOwnerExportsBefore: {"u", 5, 5, "exp_a", 10},
		qExportCursor:       {"exp_a", "u"},
	} {
		rows, err := s.w.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notUsed int
			var detail string
			if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		all := strings.Join(plan, "; ")
		want := "USING INDEX exports_owner"
		if q == qExportCursor {
			want = "USING INDEX sqlite_autoindex_exports_1" // the primary key
		}
		if !strings.Contains(all, want) || strings.Contains(all, "SCAN exports") && !strings.Contains(all, "USING INDEX") {
			t.Errorf("plan of %q:\n  %s\nwant a search %s", q, all, want)
		}
		t.Logf("%s", all)
	}
}
