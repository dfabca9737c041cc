package db_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
)

func TestOpenCreatesPrivateFileAndDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "nested")
	path := filepath.Join(dir, "companion.db")
	s := openAt(t, path)
	defer s.Close()
	save(t, s, core.Workspace{ID: "ws_1", Name: "one"})

	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700}, {filepath.Dir(dir), 0o700}, {path, 0o600}, {path + "-wal", 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, got, c.mode)
		}
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
}

func TestInstanceIDStableAcrossReopen(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	id, err := s.InstanceID(ctx)
	if err != nil || id == "" {
		t.Fatalf("InstanceID = %q, %v", id, err)
	}
	s.Close()
	s2 := openAt(t, path)
	defer s2.Close()
	if id2, _ := s2.InstanceID(ctx); id2 != id {
		t.Fatalf("InstanceID after reopen = %q, want %q", id2, id)
	}
	other, _ := openTemp(t)
	if id3, _ := other.InstanceID(ctx); id3 == id {
		t.Fatalf("two databases share instance id %q", id)
	}
}

// rawExec runs statements on the file with a plain connection, as another
// program (or a newer companion) would.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	conn, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func rawUserVersion(t *testing.T, path string) int {
	t.Helper()
	conn, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var v int
	if err := conn.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestNewerSchemaRefused(t *testing.T) {
	s, path := openTemp(t)
	save(t, s, core.Workspace{ID: "ws_1"})
	s.Close()
	known := rawUserVersion(t, path)
	if known < 1 {
		t.Fatalf("user_version after open = %d, want at least 1", known)
	}
	rawExec(t, path, `PRAGMA user_version = 999`)
	before, _ := os.ReadFile(path)

	_, err := db.Open(context.Background(), path)
	if !errors.Is(err, db.ErrSchemaTooNew) {
		t.Fatalf("Open = %v, want ErrSchemaTooNew", err)
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{path, "999", "up to " + strconv.Itoa(known), "upgrade companion", "--data-dir"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not mention %q", msg, want)
		}
	}
	if err := db.CheckFile(path); !errors.Is(err, db.ErrSchemaTooNew) || err.Error() != msg {
		t.Errorf("CheckFile = %v, want Open's refusal %q", err, msg)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the refused file was modified")
	}
}

func TestGarbageFileRefused(t *testing.T) {
	random := make([]byte, 8192)
	rand.Read(random)
	for name, content := range map[string][]byte{
		"text":           []byte("these are somebody's notes, not a database\n"),
		"short":          []byte("SQL"),
		"random":         random,
		"damaged header": append([]byte("SQLite format 3\x00"), random[:4080]...),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "companion.db")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := db.Open(context.Background(), path)
			if err == nil {
				s.Close()
				t.Fatal("Open of a non-database succeeded")
			}
			if !errors.Is(err, db.ErrNotDatabase) {
				t.Fatalf("Open = %v, want ErrNotDatabase", err)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "--data-dir") {
				t.Errorf("message %q should name the file and say what to do", err)
			}
			if err := db.CheckFile(path); !errors.Is(err, db.ErrNotDatabase) {
				t.Errorf("CheckFile = %v, want ErrNotDatabase", err)
			}
			got, _ := os.ReadFile(path)
			if !bytes.Equal(got, content) {
				t.Error("the refused file was modified")
			}
		})
	}
}

func TestOtherApplicationsDatabaseRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	rawExec(t, path, `CREATE TABLE notes (body TEXT)`, `INSERT INTO notes VALUES ('hello')`, `PRAGMA user_version = 1`)
	before, _ := os.ReadFile(path)
	_, err := db.Open(context.Background(), path)
	if !errors.Is(err, db.ErrNotDatabase) || !strings.Contains(err.Error(), "another application") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open = %v, want ErrNotDatabase naming the file and another application", err)
	}
	if err2 := db.CheckFile(path); !errors.Is(err2, db.ErrNotDatabase) || err2.Error() != err.Error() {
		t.Errorf("CheckFile = %v, want Open's refusal %q", err2, err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the other application's file was modified")
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatal("opening another application's file switched it to WAL")
	}
}

func TestDirectoryInTheWay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "companion.db")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := db.Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open = %v, want an error naming %s", err, path)
	}
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	save(t, s, core.Workspace{ID: "ws_1", Name: "kept"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	v := rawUserVersion(t, path)
	s2 := openAt(t, path)
	defer s2.Close()
	ws, err := s2.GetWorkspace(ctx, "ws_1")
	if err != nil || ws.Name != "kept" {
		t.Fatalf("after reopen: %+v, %v", ws, err)
	}
	if v2 := rawUserVersion(t, path); v2 != v {
		t.Fatalf("user_version changed on reopen: %d -> %d", v, v2)
	}
}

func TestClosedStoreFails(t *testing.T) {
	s, _ := openTemp(t)
	s.Close()
	if _, err := s.SaveWorkspace(context.Background(), core.Workspace{ID: "ws_1"}); err == nil {
		t.Fatal("SaveWorkspace on a closed store succeeded")
	}
	if _, err := s.ListWorkspaces(context.Background()); err == nil {
		t.Fatal("ListWorkspaces on a closed store succeeded")
	}
}

// TestCheckFilePassesWhatOpenAccepts: a missing file, an empty one and
// companion's own (new, and reopened at the newest schema) pass the
// header check; it creates nothing.
func TestCheckFilePassesWhatOpenAccepts(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if err := db.CheckFile(missing); err != nil {
		t.Fatalf("CheckFile(missing) = %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CheckFile created %s: %v", missing, err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := db.CheckFile(empty); err != nil {
		t.Fatalf("CheckFile(empty) = %v", err)
	}
	s, path := openTemp(t)
	save(t, s, core.Workspace{ID: "ws_1"})
	s.Close()
	if err := db.CheckFile(path); err != nil {
		t.Fatalf("CheckFile(companion's file) = %v", err)
	}
}
