package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// newTestService starts a service on cfg and closes it when the test
// ends (before any cleanup registered earlier, such as its store's).
func newTestService(t testing.TB, ctx context.Context, cfg core.Config) *core.Service {
	t.Helper()
	svc, err := core.NewService(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		svc.Close(cctx)
	})
	return svc
}
