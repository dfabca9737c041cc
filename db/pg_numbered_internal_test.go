package db

import (
	"strings"
	"testing"
)

// Every SQLite query PostgreSQL reuses through pgNumbered comes out with
// $N placeholders only, numbers of two digits included; a bare ? is
// refused rather than passed on.
func TestPGNumbered(t *testing.T) {
	for _, q := range []func() string{pgRetentionDue, pgRetentionUnwarned} {
		if got := q(); strings.Contains(got, "?") || !strings.Contains(got, "$3") {
			t.Errorf("converted query %q", got)
		}
	}
	if got := pgNumbered("a = ?1 AND b = ?12 OR c = ?2")(); got != "a = $1 AND b = $12 OR c = $2" {
		t.Errorf("got %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("a bare ? was converted")
		}
	}()
	pgNumbered("a = ? AND b = ?1")()
}
