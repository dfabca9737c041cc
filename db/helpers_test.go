package db_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
)

func openAt(t testing.TB, path string) *db.Store {
	t.Helper()
	s, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

// openTemp opens a fresh store in a temporary directory and closes it when
// the test ends.
func openTemp(t testing.TB) (*db.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "companion.db")
	s := openAt(t, path)
	t.Cleanup(func() { s.Close() })
	return s, path
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(s *db.Store, start time.Time) *clock {
	c := &clock{t: start}
	db.SetClock(s, c.now)
	return c
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func save(t testing.TB, s *db.Store, ws core.Workspace) core.Workspace {
	t.Helper()
	saved, err := s.SaveWorkspace(context.Background(), ws)
	if err != nil {
		t.Fatalf("SaveWorkspace(%s): %v", ws.ID, err)
	}
	return saved
}

func wantKind(t testing.TB, err error, kind core.ErrorKind) {
	t.Helper()
	if !core.IsKind(err, kind) {
		t.Fatalf("error = %v (kind %q), want kind %q", err, core.KindOf(err), kind)
	}
}

func currentRev(t testing.TB, s *db.Store) int64 {
	t.Helper()
	_, rev, complete, err := s.Changes(context.Background(), 1<<62)
	if err != nil || complete {
		t.Fatalf("Changes(1<<62) = complete %v, err %v; want incomplete, no error", complete, err)
	}
	return rev
}
