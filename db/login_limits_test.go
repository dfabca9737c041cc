package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/db/storetest"
)

// TestLoginLimitsPruneBounded: ended windows and lapsed known marks are
// deleted a bounded batch per login, so a flood of stale keys costs each
// login a fixed amount of work and the tables still drain.
func TestLoginLimitsPruneBounded(t *testing.T) {
	for name, e := range map[string]storetest.Engine{"sqlite": sqliteEngine, "postgres": pgEngine} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			s, _ := e.Open(t, func() time.Time { return at })
			for i := range 100 {
				key := fmt.Sprintf("a|10.0.0.%d", i)
				if err := s.AddLoginFailure(ctx, at, []auth.FailureKey{{Key: key, Window: time.Minute}}); err != nil {
					t.Fatal(err)
				}
				if err := s.LoginSucceeded(ctx, at, "none", "alice|"+key, at.Add(time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
			if f, k := db.CountRows(t, s, "login_failures"), db.CountRows(t, s, "login_known"); f != 100 || k != 100 {
				t.Fatalf("rows before anything ended: %d failures, %d known; want 100, 100", f, k)
			}
			later := at.Add(time.Hour)
			fresh := []auth.FailureKey{{Key: "a|fresh", Window: time.Minute}}
			if err := s.AddLoginFailure(ctx, later, fresh); err != nil {
				t.Fatal(err)
			}
			f, k := db.CountRows(t, s, "login_failures"), db.CountRows(t, s, "login_known")
			if f != 100+1-32 || k != 100-32 {
				t.Fatalf("after one failed login: %d failures, %d known; want %d, %d (one batch of 32 each)", f, k, 100+1-32, 100-32)
			}
			for range 4 {
				if err := s.AddLoginFailure(ctx, later, fresh); err != nil {
					t.Fatal(err)
				}
			}
			if f, k := db.CountRows(t, s, "login_failures"), db.CountRows(t, s, "login_known"); f != 1 || k != 0 {
				t.Fatalf("after five failed logins: %d failures, %d known; want only the fresh window", f, k)
			}
		})
	}
}
