package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// webhookMetrics are registered with the first webhook call: a desktop,
// which has no webhooks, shows none.
func (m *Metrics) webhookMetrics() *prometheus.CounterVec {
	m.webhooksOnce.Do(func() {
		// Both label sets are fixed lists: core.EventKinds, and
		// delivered, retry, failed.
		m.webhookAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "companion_webhook_attempts_total",
			Help: "Webhook delivery attempts, by event (retention.warning, delete.done, delete.blocked, export.failed, account.unhealthy) and outcome (delivered; retry: not accepted, tried again later; failed: given up).",
		}, []string{"event", "outcome"})
		m.reg.MustRegister(m.webhookAttempts)
	})
	return m.webhookAttempts
}

// WebhookAttempt counts one attempt (webhooks.Observer).
func (m *Metrics) WebhookAttempt(event, outcome string) {
	m.webhookMetrics().WithLabelValues(event, outcome).Inc()
}

// WebhookOutbox reports the outbox's depth at scrape time: deliveries
// pending (waiting for an attempt) and failed (given up).
func (m *Metrics) WebhookOutbox(depth func(ctx context.Context) (pending, failed int, err error)) {
	m.webhookMetrics()
	m.reg.MustRegister(&outbox{depth: depth, desc: prometheus.NewDesc("companion_webhook_outbox_deliveries",
		"Webhook deliveries in the outbox, by state (pending: waiting for an attempt; failed: given up, kept for GET /v1/webhooks/{id}/deliveries).",
		[]string{"state"}, nil)})
}

type outbox struct {
	depth func(ctx context.Context) (int, int, error)
	desc  *prometheus.Desc
}

func (o *outbox) Describe(ch chan<- *prometheus.Desc) { ch <- o.desc }

func (o *outbox) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, f, err := o.depth(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(o.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, float64(p), "pending")
	ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, float64(f), "failed")
}
