package db

import (
	"context"
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

	<-s.warm
	if s.reads() != s.rs {
		t.Fatal("a warm store reads through the write connection")
	}
	w1, l1, a1, n1 := read()

	warm := s.warm
	s.warm = make(chan struct{}) // as if the pool were still warming
	if s.reads() != s.wr {
		t.Fatal("a cold store does not read through the write connection")
	}
	w2, l2, a2, n2 := read()
	s.warm = warm

	if !reflect.DeepEqual(w1, w2) || !reflect.DeepEqual(l1, l2) || !reflect.DeepEqual(a1, a2) || n1 != n2 || len(l1) != 1 {
		t.Fatalf("the write connection answered %+v %+v %+v %d,\nthe read pool %+v %+v %+v %d", w2, l2, a2, n2, w1, l1, a1, n1)
	}
}

// A store closed right after opening waits for its read pool's warm-up
// rather than closing the pool under it.
func TestCloseRightAfterOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "companion.db")
	for range 20 {
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
