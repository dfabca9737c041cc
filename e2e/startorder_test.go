package e2e

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestDesktopRefusesForeignDatabaseBeforeReady: a companion.db that is
// another application's, or was written by a newer companion, is refused
// before the ready line (its header says so), and is left as it was. The
// other refusals of the data dir come before the line too
// (TestRefusalsComeBeforeReady).
func TestDesktopRefusesForeignDatabaseBeforeReady(t *testing.T) {
	newer := t.TempDir()
	p := start(t, options{dataDir: newer, args: []string{"--docker-scope", "unused"}})
	p.must(200, "GET", "/v1/workspaces", nil, nil) // answered once the store is open and migrated
	p.stop()
	other := t.TempDir()
	for name, c := range map[string]struct {
		dir, stmt, want string
	}{
		"another application's file": {other, `CREATE TABLE notes (body TEXT); PRAGMA user_version = 3`, "another application"},
		"a newer companion's file":   {newer, `PRAGMA user_version = 999`, "written by a newer companion"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(c.dir, "companion.db")
			conn, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(c.stmt); err != nil {
				t.Fatal(err)
			}
			if err := conn.Close(); err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			logs := startRefused(t, noKeyring, "desktop", "--data-dir", c.dir, "--docker-scope", "unused")
			if !strings.Contains(logs, c.want) || !strings.Contains(logs, path) {
				t.Fatalf("refusal does not say %q and name %s:\n%s", c.want, path, logs)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("the refused file was modified")
			}
		})
	}
}
