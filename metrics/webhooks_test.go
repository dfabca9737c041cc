package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/canvasapp/companion/metrics"
)

// TestWebhookMetrics: attempts are counted by event and outcome, and the
// outbox's depth is read at each scrape.
func TestWebhookMetrics(t *testing.T) {
	m := metrics.New()
	pending, failed := 3, 1
	m.WebhookOutbox(func(context.Context) (int, int, error) { return pending, failed, nil })
	m.WebhookAttempt("delete.done", "retry")
	m.WebhookAttempt("delete.done", "delivered")
	m.WebhookAttempt("delete.done", "delivered")
	want := `
# HELP companion_webhook_attempts_total Webhook delivery attempts, by event (retention.warning, delete.done, delete.blocked, export.failed, account.unhealthy) and outcome (delivered; retry: not accepted, tried again later; failed: given up).
# TYPE companion_webhook_attempts_total counter
companion_webhook_attempts_total{event="delete.done",outcome="delivered"} 2
companion_webhook_attempts_total{event="delete.done",outcome="retry"} 1
# HELP companion_webhook_outbox_deliveries Webhook deliveries in the outbox, by state (pending: waiting for an attempt; failed: given up, kept for GET /v1/webhooks/{id}/deliveries).
# TYPE companion_webhook_outbox_deliveries gauge
companion_webhook_outbox_deliveries{state="failed"} 1
companion_webhook_outbox_deliveries{state="pending"} 3
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "companion_webhook_attempts_total", "companion_webhook_outbox_deliveries"); err != nil {
		t.Error(err)
	}
	pending = 0
	want = `
# HELP companion_webhook_outbox_deliveries Webhook deliveries in the outbox, by state (pending: waiting for an attempt; failed: given up, kept for GET /v1/webhooks/{id}/deliveries).
# TYPE companion_webhook_outbox_deliveries gauge
companion_webhook_outbox_deliveries{state="failed"} 1
companion_webhook_outbox_deliveries{state="pending"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "companion_webhook_outbox_deliveries"); err != nil {
		t.Error(err)
	}
}
