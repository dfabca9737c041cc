package testsupport

import (
	"errors"
	"testing"
	"time"
)

func TestPollErrReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := PollErr(10*time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("PollErr = %v after %d calls; want nil after 3", err, calls)
	}
}

func TestPollErrGivesUpWithTheLastReason(t *testing.T) {
	calls := 0
	err := PollErr(20*time.Millisecond, func() error {
		calls++
		return errors.New("still missing")
	})
	if err == nil || err.Error() != "still missing" || calls < 2 {
		t.Fatalf("PollErr = %v after %d calls; want the check's last error after retrying", err, calls)
	}
}

func TestRequired(t *testing.T) {
	t.Setenv(RequireModules, "1")
	if !Required(RequireModules) {
		t.Fatal("Required with the variable set to 1 is false")
	}
	t.Setenv(RequireModules, "")
	if Required(RequireModules) {
		t.Fatal("Required with the variable unset is true")
	}
}
