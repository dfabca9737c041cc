package testsupport

import (
	"errors"
	"testing"
	"time"
)

// Poll calls check until it returns nil and fails tb, with check's last
// error, when timeout passes first. check describes what is still missing
// in its error. The wait between calls starts small and grows, so a fast
// condition is seen at once and a slow one does not spin the CPU.
func Poll(tb testing.TB, timeout time.Duration, check func() error) {
	tb.Helper()
	if err := PollErr(timeout, check); err != nil {
		tb.Fatalf("after %v: %v", timeout, err)
	}
}

// Until is Poll for a condition without a reason: it fails tb with "timed
// out waiting for <what>".
func Until(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	errNot := errors.New("timed out waiting for " + what)
	Poll(tb, timeout, func() error {
		if cond() {
			return nil
		}
		return errNot
	})
}

// PollErr is Poll for code that is not a test (a benchmark's setup, a
// helper goroutine): it returns check's last error instead of failing.
func PollErr(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	wait := 2 * time.Millisecond
	for {
		err := check()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		time.Sleep(min(wait, left))
		wait = min(2*wait, 100*time.Millisecond)
	}
}
