package db

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// Until the read pool is warm, reads run on the write connection; they
// must answer exactly what the pool answers.
func TestReadsBeforeWarmRunOnTheWriter(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ws := core.Workspace{ID: "ws_1", Name: "one", AccountID: "acc_1", Provider: "docker", State: core.StatePaused,
		Options: map[string]string{"image": "agent:latest"}, PausedAt: at, CreatedAt: at,
		Size: &core.Size{Bytes: 42, Source: core.SizeDockerEngineUsed, At: at}}
	if _, err := s.SaveWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAccount(ctx, core.Account{ID: "acc_1", Provider: "docker", Label: "Local", Config: map[string]string{"scope": "x"}, CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	read := func() (core.Workspace, []core.Workspace, core.Account, int) {
		t.Helper()
		got, err := s.GetWorkspace(ctx, "ws_1")
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.reads().query(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE removed_at IS NULL ORDER BY rev`)
		if err != nil {
			t.Fatal(err)
		}
		list, err := scanWorkspaces(rows)
		if err != nil {
			t.Fatal(err)
		}
		acct, err := s.GetAccount(ctx, "acc_1")
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.CountSealedSecrets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got, list, acct, n
	}

	// Nothing has asked for the read pool yet: Open does not warm it.
	if s.reads() != s.wr {
		t.Fatal("a cold store does not read through the write connection")
	}
	w2, l2, a2, n2 := read()

	s.WarmReads()
	<-s.warm
	if s.reads() != s.rs {
		t.Fatal("a warm store reads through the write connection")
	}
	w1, l1, a1, n1 := read()

	if !reflect.DeepEqual(w1, w2) || !reflect.DeepEqual(l1, l2) || !reflect.DeepEqual(a1, a2) || n1 != n2 || len(l1) != 1 {
		t.Fatalf("the write connection answered %+v %+v %+v %d,\nthe read pool %+v %+v %+v %d", w2, l2, a2, n2, w1, l1, a1, n1)
	}
}

// A store closed right after opening waits for its read pool's warm-up
// rather than closing the pool under it, and one never warmed closes too.
func TestCloseRightAfterOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "companion.db")
	for i := range 20 {
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			s.WarmReads()
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A read transaction and the list of all workspaces start the read pool's
// warm-up themselves when nothing else has.
func TestReadsWarmThePoolThemselves(t *testing.T) {
	ctx := context.Background()
	for _, first := range []string{"list", "read transaction"} {
		s, err := Open(ctx, filepath.Join(t.TempDir(), "companion.db"))
		if err != nil {
			t.Fatal(err)
		}
		if first == "list" {
			_, err = s.ListWorkspaces(ctx)
		} else {
			_, err = s.ListExports(ctx, "ws_none")
		}
		if err != nil {
			t.Fatalf("%s: %v", first, err)
		}
		select {
		case <-s.warm:
		default:
			t.Fatalf("%s returned with the read pool not warm", first)
		}
		if s.reads() != s.rs {
			t.Fatalf("after a %s the store does not read through the pool", first)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// The WAL and shared-memory files outlive a close, the WAL emptied into
// the main file and truncated to zero bytes, so the next open creates no
// file; what was written is there after reopening.
func TestWALKeptEmptyAcrossClose(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "companion.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := s.PutAccount(ctx, core.Account{ID: "acc_1", Provider: "docker", Label: "Local", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		st, err := os.Stat(path + suffix)
		if err != nil {
			t.Fatalf("%s after close: %v", suffix, err)
		}
		if suffix == "-wal" && st.Size() != 0 {
			t.Fatalf("the WAL holds %d bytes after close, want 0 (checkpointed and truncated)", st.Size())
		}
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if a, err := s.GetAccount(ctx, "acc_1"); err != nil || a.Label != "Local" {
		t.Fatalf("after reopening: %+v %v", a, err)
	}
}

// A new file's first transaction goes into its WAL unsynced; should the
// machine stop before the WAL reaches the disk, what is left is the main
// file with its header page alone, which opens as a new database.
func TestNewFileWithoutItsWALOpensAsNew(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	main, err := os.ReadFile(filepath.Join(dir, "companion.db")) // no checkpoint yet: the schema is in the WAL
	if err != nil {
		t.Fatal(err)
	}
	if len(main) == 0 || len(main) > 4096 {
		t.Fatalf("the main file holds %d bytes before any checkpoint, want its header page", len(main))
	}
	lost := filepath.Join(t.TempDir(), "companion.db")
	if err := os.WriteFile(lost, main, 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, lost)
	if err != nil {
		t.Fatalf("the header page alone: %v", err)
	}
	defer again.Close()
	ms, _ := migrations()
	if v, _, err := schemaVersion(ctx, again.w); err != nil || v != len(ms) {
		t.Fatalf("reopened at schema version %d (%v), want %d", v, err, len(ms))
	}
	if _, err := again.ListWorkspaces(ctx); err != nil {
		t.Fatal(err)
	}
}
