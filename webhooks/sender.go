package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/canvasapp/companion/core"
)

// Outcomes of an attempt (Observer, metrics).
const (
	OutcomeDelivered = "delivered"
	OutcomeRetry     = "retry"
	OutcomeFailed    = "failed"
)

// claimBatch is how many deliveries one pass claims.
const claimBatch = 16

// maxAnswer is how much of a receiver's answer is read: enough for an
// error message, and the connection can be reused.
const maxAnswer = 4 << 10

// Run sends due deliveries until ctx ends: at once when an event was
// stored here, and every Poll for those other replicas stored or whose
// backoff ran out. At the end it gives up the leases it holds.
func (h *Hooks) Run(ctx context.Context) {
	t := time.NewTicker(h.cfg.Poll)
	defer t.Stop()
	var pruned time.Time
	for {
		for h.Pass(ctx) == claimBatch && ctx.Err() == nil {
		}
		if now := h.cfg.Now(); now.Sub(pruned) >= pruneEvery {
			pruned = now
			h.Prune(ctx)
		}
		select {
		case <-ctx.Done():
			if err := h.cfg.Store.ReleaseDeliveries(context.WithoutCancel(ctx), h.holder); err != nil {
				h.log.Warn("could not release webhook deliveries at shutdown; they go out once their lease ends", "err", err)
			}
			return
		case <-t.C:
		case <-h.kick:
		}
	}
}

// KeepDeliveries is how long delivered and failed deliveries stay
// visible (GET /v1/webhooks/{id}/deliveries) before they are pruned.
const KeepDeliveries = 30 * 24 * time.Hour

// pruneEvery is how often the sender prunes; pruneBatch bounds one
// statement, and a pass goes on until less than a batch was left.
const (
	pruneEvery = time.Hour
	pruneBatch = 500
)

// Prune forgets delivered and failed deliveries older than
// KeepDeliveries; pending ones are never pruned.
func (h *Hooks) Prune(ctx context.Context) {
	before := h.cfg.Now().Add(-KeepDeliveries)
	for ctx.Err() == nil {
		n, err := h.cfg.Store.PruneDeliveries(ctx, before, pruneBatch)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("could not prune old webhook deliveries", "err", err)
			}
			return
		}
		if n < pruneBatch {
			return
		}
	}
}

// Pass claims the due deliveries (a batch) and sends each once. It
// returns how many it claimed.
func (h *Hooks) Pass(ctx context.Context) int {
	ds, err := h.cfg.Store.ClaimDeliveries(ctx, h.holder, h.cfg.Now(), h.cfg.Lease, claimBatch)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("could not claim webhook deliveries", "err", err)
		}
		return 0
	}
	// A few at a time, so that one receiver that never answers does not
	// hold back everyone else's deliveries for a whole batch.
	slots := make(chan struct{}, h.cfg.Parallel)
	var wg sync.WaitGroup
	for _, d := range ds {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if ctx.Err() != nil {
				return // the lease is released at shutdown
			}
			if h.cfg.Now().Add(h.cfg.Timeout).After(d.LeaseUntil) {
				// Slow answers before it used up the lease: an attempt
				// now could outlive it while another sender takes the
				// delivery. Give it back untried instead.
				if err := h.cfg.Store.FinishDelivery(context.WithoutCancel(ctx), h.holder, d); err != nil {
					h.log.Warn("could not give back a webhook delivery", "delivery", d.ID, "err", err)
				}
				return
			}
			h.attempt(ctx, d)
		}()
	}
	wg.Wait()
	return len(ds)
}

// attempt sends d once and records the outcome.
func (h *Hooks) attempt(ctx context.Context, d Delivery) {
	status, err := h.send(ctx, d)
	if ctx.Err() != nil {
		return // shutting down: the lease is released, the attempt not counted
	}
	now := h.cfg.Now().UTC()
	d.Attempts++
	d.LastStatus = status
	outcome := OutcomeDelivered
	switch {
	case err == nil:
		d.State, d.DeliveredAt, d.LastError = StateDelivered, now, ""
	case errors.As(err, new(permanent)):
		d.State, d.LastError, outcome = StateFailed, err.Error(), OutcomeFailed
	case d.Attempts >= h.cfg.MaxAttempts:
		d.State, d.LastError, outcome = StateFailed, fmt.Sprintf("%s (gave up after %d attempts)", err, d.Attempts), OutcomeFailed
	default:
		d.NextAt, d.LastError, outcome = now.Add(h.backoff.After(d.Attempts)), err.Error(), OutcomeRetry
	}
	if o := h.cfg.Observer; o != nil {
		o.WebhookAttempt(d.Event, outcome)
	}
	if ferr := h.cfg.Store.FinishDelivery(context.WithoutCancel(ctx), h.holder, d); ferr != nil {
		// Lost the lease (this attempt outlived it): another sender
		// owns the delivery now; the receiver's idempotency key covers
		// a second copy.
		h.log.Warn("could not record a webhook attempt", "delivery", d.ID, "event", d.Event, "err", ferr)
		return
	}
	if outcome != OutcomeDelivered {
		h.log.Info("webhook delivery not accepted", "delivery", d.ID, "event", d.Event, "attempts", d.Attempts, "outcome", outcome, "status", status, "err", d.LastError)
	}
}

// permanent is a failure that no retry mends: the delivery is marked
// failed at once.
type permanent struct{ error }

// errGone: the webhook was deleted.
var errGone = permanent{errors.New("the webhook or its secret was removed")}

// send makes one attempt: it signs the payload as it is now and posts it.
// Only a 2xx answer delivers it.
func (h *Hooks) send(ctx context.Context, d Delivery) (int, error) {
	hook, err := h.cfg.Store.Webhook(ctx, d.WebhookID)
	if core.IsKind(err, core.KindNotFound) {
		return 0, errGone
	}
	if err != nil {
		return 0, fmt.Errorf("read the webhook: %w", err)
	}
	if _, err := h.CheckURL(hook.URL); err != nil {
		return 0, permanent{fmt.Errorf("the webhook's URL is no longer allowed: %v", err)}
	}
	secrets, err := h.signingSecrets(ctx, hook)
	if core.IsKind(err, core.KindNotFound) {
		return 0, errGone
	}
	if err != nil {
		return 0, err
	}
	actx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, hook.URL, bytes.NewReader(d.Payload))
	if err != nil {
		return 0, permanent{fmt.Errorf("the webhook's URL: %v", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "companion-webhooks/1")
	req.Header.Set(HeaderEvent, d.Event)
	req.Header.Set(HeaderEventID, d.EventID)
	req.Header.Set(HeaderIdempotency, d.ID)
	req.Header.Set(HeaderSignature, SignAll(secrets, h.cfg.Now(), d.Payload))
	resp, err := h.cfg.HTTP.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post to the webhook: %s", cleanErr(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer)) // a little more, to reuse the connection
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the webhook answered %d %s", resp.StatusCode, firstLine(answer))
	}
	return resp.StatusCode, nil
}

// cleanErr is an error of the client without the URL (which may carry a
// token in its query), as the guard or the network said it.
func cleanErr(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}

// firstLine is a short, printable start of a receiver's answer.
func firstLine(b []byte) string {
	if i := bytes.IndexAny(b, "\r\n"); i >= 0 {
		b = b[:i]
	}
	if len(b) > 200 {
		b = b[:200]
	}
	out := make([]rune, 0, len(b))
	for _, r := range string(b) {
		if r >= 0x20 && r != 0x7f {
			out = append(out, r)
		}
	}
	return string(out)
}
