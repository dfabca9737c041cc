package agenterr

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
)

// TestClassifyMakesOnlyRetryableFailuresTransient: 429 is rate-limited and
// 5xx unavailable, both with the server's Retry-After; unconfirmed
// captures and storage failures stay permanent for core's retry.
func TestClassifyMakesOnlyRetryableFailuresTransient(t *testing.T) {
	wrap := func(e *agentclient.Error) error { return fmt.Errorf("export: tar.gz archive of /workspace: %w", e) }
	got := Classify(wrap(&agentclient.Error{Op: "GET /api/file/archive", Status: 429, RetryAfter: 7 * time.Second, Class: agentclient.ClassRetryable}))
	if core.KindOf(got) != core.KindRateLimited || core.RetryAfterOf(got) != 7*time.Second {
		t.Errorf("429: %v kind %s retry-after %s", got, core.KindOf(got), core.RetryAfterOf(got))
	}
	got = Classify(wrap(&agentclient.Error{Op: "GET /api/file/archive", Status: 503, Class: agentclient.ClassRetryable}))
	if core.KindOf(got) != core.KindUnavailable {
		t.Errorf("503: kind %s", core.KindOf(got))
	}
	for _, err := range []error{
		wrap(&agentclient.Error{Op: "GET /api/file/archive", Status: 401, Class: agentclient.ClassUnconfirmed}),
		errors.New("export location is full"),
	} {
		if got := Classify(err); core.KindOf(got) != core.KindInternal || got != err {
			t.Errorf("%v became %v (kind %s)", err, got, core.KindOf(got))
		}
	}
	if Classify(nil) != nil {
		t.Error("nil became an error")
	}
}
