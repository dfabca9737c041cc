package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
	"github.com/jackc/pgx/v5"
)

// startPG starts a throwaway PostgreSQL for one test (e2e's TestMain
// builds the binary, so it cannot be pgtest.Main) and returns a fresh
// database's URL.
func startPG(t *testing.T) string {
	t.Helper()
	c, err := pgtest.Start()
	if err != nil {
		t.Fatalf("PostgreSQL is needed and could not be started: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c.NewDatabase(t)
}

// TestServeOnPostgres runs `companion serve --database-file` as an
// operator would, drives a Docker workspace through create, pause, resume
// and delete over HTTP, restarts companion, and checks that a WebSocket
// client reconnecting with ?since gets exactly what changed meanwhile.
func TestServeOnPostgres(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	url := startPG(t)
	urlFile := filepath.Join(t.TempDir(), "database-url")
	if err := os.WriteFile(urlFile, []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := options{mode: "serve", dataDir: t.TempDir(),
		args: []string{"--listen", "127.0.0.1:0", "--docker-image", image, "--docker-scope", scope, "--database-file", urlFile}}
	p := start(t, opts)
	if _, err := os.Stat(filepath.Join(opts.dataDir, "companion.db")); err == nil {
		t.Fatal("serve --database-file wrote a SQLite database in the data dir")
	}
	s := p.dial(-1)
	s.next(10 * time.Second)

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "on-postgres"}, &created)
	id := created.Workspace.ID
	w := p.waitState(id, "running", 60*time.Second)
	t.Cleanup(func() {
		if containerExists(t, w.BoxID) {
			removeContainer(t, w.BoxID)
		}
	})
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", 60*time.Second)
	last := s.waitFor("paused upsert", 30*time.Second, upsertOf(id, "paused"))

	// Restart: state and revisions come back from PostgreSQL.
	p.term()
	p = start(t, opts)
	var got struct{ Workspace workspace }
	p.must(200, "GET", "/v1/workspaces/"+id, nil, &got)
	if got.Workspace.State != "paused" {
		t.Fatalf("after restart the workspace is %+v, want paused", got.Workspace)
	}
	// Nothing changed since the paused upsert: ?since gets no snapshot.
	s = p.dial(last.Rev)
	p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	first := s.next(30 * time.Second)
	if first.Type == "snapshot" {
		t.Fatalf("?since=%d after a restart sent a snapshot, want only what changed", last.Rev)
	}
	if first.Rev <= last.Rev {
		t.Fatalf("first frame after ?since=%d has rev %d", last.Rev, first.Rev)
	}
	s.waitFor("running after resume", 60*time.Second, upsertOf(id, "running"))

	preview := p.deleteConfirmed(id)
	s.waitFor("removed", 90*time.Second, func(m wsMsg) bool { return m.Type == "remove" && m.ID == id })
	if containerExists(t, w.BoxID) {
		t.Fatal("the box survived its delete")
	}
	// The preview's token is single use, across restarts too.
	code, _ := p.call("POST", "/v1/workspaces/"+id+"/delete", map[string]string{"token": preview.Token}, nil)
	if code < 400 {
		t.Fatalf("a spent delete token was accepted again: %d", code)
	}

	// The trail in PostgreSQL verifies, while serve runs, and an edited
	// entry is named.
	if out, err := runCompanion(t, "audit", "verify", "--database-file", urlFile); err != nil || !strings.Contains(out, "audit trail OK") {
		t.Fatalf("audit verify on PostgreSQL: %v\n%s", err, out)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var victim int64
	if err := conn.QueryRow(context.Background(), `UPDATE audit SET outcome = 'ok (edited)'
		WHERE id = (SELECT min(id) FROM audit WHERE action = 'delete') RETURNING id`).Scan(&victim); err != nil {
		t.Fatal(err)
	}
	out, err := runCompanion(t, "audit", "verify", "--database-file", urlFile)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, fmt.Sprintf("BROKEN at entry %d", victim)) {
		t.Fatalf("audit verify after editing entry %d: %v\n%s\nwant exit 1 naming it", victim, err, out)
	}
}

// TestServeRefusesBadDatabase: a wrong URL or a desktop asked for
// PostgreSQL stops companion with a clear message, before it serves.
func TestServeRefusesBadDatabase(t *testing.T) {
	for _, c := range []struct {
		mode, arg, want string
	}{
		{"serve", "mysql://x", "postgres://"},
		{"serve", "postgres://companion@127.0.0.1:1/none?connect_timeout=2", "connect to"},
		{"desktop", "postgres://companion@127.0.0.1:1/none", "SQLite"},
	} {
		out, err := runCompanion(t, c.mode, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--database", c.arg)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s --database %s: err %v, output %q; want a failure mentioning %q", c.mode, c.arg, err, out, c.want)
		}
	}
}

// runCompanion runs companion to completion and returns its output.
func runCompanion(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(companionBin, args...).CombinedOutput()
	return string(out), err
}

// TestMigrateSQLiteToPostgres moves a data dir with a paused Docker
// workspace into PostgreSQL with the migrate command; serve on PostgreSQL
// then shows the workspace and resumes and deletes it.
func TestMigrateSQLiteToPostgres(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	url := startPG(t)
	data := t.TempDir()
	base := []string{"--listen", "127.0.0.1:0", "--docker-image", image, "--docker-scope", scope}
	p := start(t, options{mode: "serve", dataDir: data, args: base})
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "moved"}, &created)
	id := created.Workspace.ID
	w := p.waitState(id, "running", 60*time.Second)
	t.Cleanup(func() {
		if containerExists(t, w.BoxID) {
			removeContainer(t, w.BoxID)
		}
	})
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", 60*time.Second)

	// While companion runs on the data dir, the copy is refused.
	if out, err := runCompanion(t, "migrate", "sqlite-to-postgres", "--from", data, "--to", url); err == nil || !strings.Contains(out, "stop companion") {
		t.Fatalf("migrate while serving: err %v, output %q", err, out)
	}
	p.term()
	out, err := runCompanion(t, "migrate", "sqlite-to-postgres", "--from", data, "--to", url)
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"table":"workspaces","rows":1`) || !strings.Contains(out, `"table":"accounts","rows":1`) {
		t.Fatalf("migrate report lacks the workspace or the account:\n%s", out)
	}
	// Running it again into the populated database is refused.
	if out, err := runCompanion(t, "migrate", "sqlite-to-postgres", "--from", data, "--to", url); err == nil || !strings.Contains(out, "already holds") {
		t.Fatalf("second migrate: err %v, output %q", err, out)
	}

	p = start(t, options{mode: "serve", dataDir: data, args: append(base, "--database", url)})
	var got struct{ Workspace workspace }
	p.must(200, "GET", "/v1/workspaces/"+id, nil, &got)
	if got.Workspace.State != "paused" || got.Workspace.BoxID != w.BoxID {
		t.Fatalf("after migration: %+v", got.Workspace)
	}
	p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	p.waitState(id, "running", 60*time.Second)
	p.deleteConfirmed(id)
	testsupport.Until(t, 90*time.Second, "the migrated workspace's box is deleted", func() bool { return !containerExists(t, w.BoxID) })
}

// term stops a serve process as an init system would (SIGTERM) and waits
// for a clean exit.
func (p *proc) term() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.exit != nil {
			p.t.Fatalf("companion exited with %v after SIGTERM\n%s", p.exit, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		p.t.Fatalf("companion did not exit within 30s of SIGTERM")
	}
}
