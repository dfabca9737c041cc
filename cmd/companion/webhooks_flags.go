package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/metrics"
	"github.com/canvasapp/companion/providers/wasm"
	"github.com/canvasapp/companion/webhooks"
)

// webhookFlags configure serve's webhooks (docs/webhooks.md). The
// desktop has none: it may be closed when anything worth telling happens.
type webhookFlags struct {
	allowPrivate       bool
	retryMin, retryMax time.Duration
	attempts           int
}

func (w *webhookFlags) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&w.allowPrivate, "webhooks-allow-private", false, "accept webhook URLs on loopback and private addresses (a receiver on this host or the internal network); by default webhooks go to public addresses only, as provider calls do")
	fs.DurationVar(&w.retryMin, "webhook-retry-min", 30*time.Second, "the wait after a webhook delivery's first failed attempt; it doubles per attempt (with jitter) up to --webhook-retry-max")
	fs.DurationVar(&w.retryMax, "webhook-retry-max", time.Hour, "the longest wait between two attempts of a webhook delivery")
	fs.IntVar(&w.attempts, "webhook-attempts", 10, "attempts of a webhook delivery before it is marked failed")
}

func (w *webhookFlags) check() error {
	if w.retryMin <= 0 || w.retryMax < w.retryMin {
		return fmt.Errorf("--webhook-retry-min %s and --webhook-retry-max %s: want positive durations, the max at least the min", w.retryMin, w.retryMax)
	}
	if w.attempts < 1 || w.attempts > 100 {
		return fmt.Errorf("--webhook-attempts %d: want 1 to 100", w.attempts)
	}
	return nil
}

// newWebhooks builds serve's webhooks service over the store. baseURL is
// where people reach companion (--public-url, else the bound address).
func newWebhooks(f *serverFlags, store serverStore, keys core.Secrets, log *slog.Logger, m *metrics.Metrics, addr net.Addr) (*webhooks.Hooks, error) {
	ws, ok := store.(webhooks.Store)
	if !ok {
		return nil, fmt.Errorf("this store keeps no webhooks")
	}
	base := "http://" + addr.String() + f.login.basePath
	if f.login.publicURL != "" {
		base = strings.TrimRight(f.login.publicURL, "/")
	}
	control := webhooks.Control(wasm.PublicOnly)
	if f.webhooks.allowPrivate {
		control = nil
		log.Warn("webhooks may go to loopback and private addresses (--webhooks-allow-private)")
	}
	const timeout = 10 * time.Second
	h, err := webhooks.New(webhooks.Config{Store: ws, Secrets: keys, Logger: log.With("component", "webhooks"),
		HTTP: webhooks.NewClient(control), AllowPrivate: f.webhooks.allowPrivate, Blocked: wasm.BlockedAddr, BaseURL: func() string { return base },
		MaxAttempts: f.webhooks.attempts, RetryMin: f.webhooks.retryMin, RetryMax: f.webhooks.retryMax,
		Timeout: timeout, Lease: max(f.leaseTTL, timeout+5*time.Second), Observer: m})
	if err != nil {
		return nil, err
	}
	m.WebhookOutbox(ws.OutboxDepth)
	return h, nil
}
