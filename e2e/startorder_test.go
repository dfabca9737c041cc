package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestDesktopRefusesForeignDatabaseBeforeReady: desktop prints its ready
// line before it opens the store, yet a companion.db that is another
// application's, or was written by a newer companion, is still refused
// before that line (its header says so), and is left as it was. Refusals
// only the open can find, such as the data dir's docker scope, come after
// the line and still stop companion (TestDataDirGuards).
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
			logs := desktopRefused(t, "--data-dir", c.dir, "--docker-scope", "unused")
			if !strings.Contains(logs, c.want) || !strings.Contains(logs, path) {
				t.Fatalf("refusal does not say %q and name %s:\n%s", c.want, path, logs)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("the refused file was modified")
			}
		})
	}
}

// desktopRefused runs companion desktop with its stdin held open, as the
// app that starts it does (closed, it would be told to stop), and fails
// the test unless it exits non-zero without printing a ready line. It
// returns the logs.
func desktopRefused(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, companionBin, append([]string{"desktop"}, args...)...)
	cmd.Env = append(os.Environ(), noKeyring...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var out, logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &logs
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ctx.Err() != nil || strings.Contains(out.String(), `"ready"`) {
		t.Fatalf("companion desktop %s: %v, stdout %q; want a refusal before any ready line\n%s", strings.Join(args, " "), err, out.String(), logs.String())
	}
	return logs.String()
}
