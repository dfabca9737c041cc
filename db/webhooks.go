package db

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/webhooks"
)

// Webhooks and their outbox (webhooks.Store), one body for both engines.

var (
	_ webhooks.Store = (*Store)(nil)
	_ webhooks.Store = (*PGStore)(nil)
)

const (
	webhookCols  = "id, owner, account_id, url, events, created_at, previous_secret_until"
	deliveryCols = "id, webhook_id, event_id, event, payload, created_at, state, attempts, next_at, holder, lease_until, last_status, last_error, delivered_at"

	qPutWebhook = `INSERT INTO webhooks (` + webhookCols + `) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET url = excluded.url, events = excluded.events`
	qGetWebhook     = `SELECT ` + webhookCols + ` FROM webhooks WHERE id = ?`
	qOwnerWebhooks  = `SELECT ` + webhookCols + ` FROM webhooks WHERE owner = ? ORDER BY created_at, id`
	qWebhooksFor    = `SELECT ` + webhookCols + ` FROM webhooks WHERE (owner = ? AND account_id IN ('', ?)) OR (? AND account_id = ? AND owner <> ?) ORDER BY created_at, id`
	qDropDeliveries = `DELETE FROM webhook_deliveries WHERE webhook_id = ?`
	qDropWebhook    = `DELETE FROM webhooks WHERE id = ?`
	qEnqueue        = `INSERT INTO webhook_deliveries (` + deliveryCols + `) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, '', 0, 0, '', NULL)
		ON CONFLICT (webhook_id, event_id) DO NOTHING`
	qDueDeliveries = `SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_at <= ? AND lease_until <= ?
		ORDER BY next_at, id LIMIT ?`
	qLeaseDelivery  = `UPDATE webhook_deliveries SET holder = ?, lease_until = ? WHERE id = ?`
	qGetDelivery    = `SELECT ` + deliveryCols + ` FROM webhook_deliveries WHERE id = ?`
	qFinishDelivery = `UPDATE webhook_deliveries SET state = ?, attempts = ?, next_at = ?, last_status = ?, last_error = ?,
		delivered_at = ?, holder = '', lease_until = 0 WHERE id = ? AND holder = ?`
	qReleaseDeliveries = `UPDATE webhook_deliveries SET holder = '', lease_until = 0 WHERE holder = ? AND state = 'pending'`
	qHookDeliveries    = `SELECT ` + deliveryCols + ` FROM webhook_deliveries WHERE webhook_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`
	qPruneDeliveries   = `DELETE FROM webhook_deliveries WHERE id IN
		(SELECT id FROM webhook_deliveries WHERE state <> 'pending' AND created_at < ? ORDER BY created_at LIMIT ?)`
	qOutboxDepth = `SELECT
		COALESCE(SUM(CASE WHEN state = 'pending' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN state = 'failed' THEN 1 ELSE 0 END), 0) FROM webhook_deliveries WHERE state <> 'delivered'`
)

func scanWebhook(r scanner) (webhooks.Hook, error) {
	var (
		h               webhooks.Hook
		events          string
		created, prevTo sql.NullInt64
	)
	if err := r.Scan(&h.ID, &h.Owner, &h.AccountID, &h.URL, &events, &created, &prevTo); err != nil {
		return h, err
	}
	h.PreviousSecretUntil = timeOf(prevTo)
	if events != "" {
		h.Events = strings.Split(events, ",")
	}
	h.CreatedAt = timeOf(created)
	return h, nil
}

func scanDelivery(r scanner) (webhooks.Delivery, error) {
	var (
		d                                     webhooks.Delivery
		payload                               string
		attempts, status                      int64
		created, next, lease, deliveredAtNull sql.NullInt64
	)
	err := r.Scan(&d.ID, &d.WebhookID, &d.EventID, &d.Event, &payload, &created, &d.State, &attempts, &next,
		&d.Holder, &lease, &status, &d.LastError, &deliveredAtNull)
	d.Payload, d.Attempts, d.LastStatus = []byte(payload), int(attempts), int(status)
	d.CreatedAt, d.NextAt, d.DeliveredAt = timeOf(created), timeOf(next), timeOf(deliveredAtNull)
	if lease.Valid && lease.Int64 > 0 {
		d.LeaseUntil = timeOf(lease)
	}
	return d, err
}

// nullNanos is t as a nullable column: NULL when zero.
func nullNanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return nanos(t)
}

func putWebhook(ctx context.Context, e engine, h webhooks.Hook) error {
	return e.writeTx(ctx, "put webhook "+h.ID, func(t tx) error {
		_, err := t.exec(qPutWebhook, h.ID, h.Owner, h.AccountID, h.URL, strings.Join(h.Events, ","), nanos(h.CreatedAt), nullNanos(h.PreviousSecretUntil))
		return err
	})
}

func getWebhook(ctx context.Context, e engine, id string) (webhooks.Hook, error) {
	h, err := scanWebhook(e.row(ctx, qGetWebhook, id))
	if isNoRows(err) {
		return h, notFound("webhook", id)
	}
	if err != nil {
		return h, e.wrapErr("get webhook "+id, err)
	}
	return h, nil
}

func listWebhooks(ctx context.Context, e engine, what, q string, args ...any) ([]webhooks.Hook, error) {
	r, err := e.rowsOf(ctx, q, args...)
	if err != nil {
		return nil, e.wrapErr(what, err)
	}
	list, err := scanRows(r, scanWebhook)
	if err != nil {
		return nil, e.wrapErr(what, err)
	}
	return list, nil
}

func deleteWebhook(ctx context.Context, e engine, id string) error {
	return e.writeTx(ctx, "delete webhook "+id, func(t tx) error {
		if _, err := t.exec(qDropDeliveries, id); err != nil {
			return err
		}
		n, err := t.exec(qDropWebhook, id)
		if err == nil && n == 0 {
			return notFound("webhook", id)
		}
		return err
	})
}

func enqueue(ctx context.Context, e engine, ds []webhooks.Delivery) (int, error) {
	if len(ds) == 0 {
		return 0, nil
	}
	added := 0
	err := e.writeTx(ctx, "enqueue webhook deliveries", func(t tx) error {
		added = 0
		for _, d := range ds {
			n, err := t.exec(qEnqueue, d.ID, d.WebhookID, d.EventID, d.Event, string(d.Payload), nanos(d.CreatedAt), nanos(d.NextAt))
			if err != nil {
				return err
			}
			added += int(n)
		}
		return nil
	})
	return added, err
}

func claimDeliveries(ctx context.Context, e engine, holder string, now time.Time, lease time.Duration, limit int) ([]webhooks.Delivery, error) {
	var out []webhooks.Delivery
	err := e.writeTx(ctx, "claim webhook deliveries", func(t tx) error {
		out = out[:0]
		r, err := t.query(qDueDeliveries+t.skipLocked(), nanos(now), nanos(now), limit)
		if err != nil {
			return err
		}
		ids, err := scanRows(r, func(r scanner) (string, error) {
			var id string
			return id, r.Scan(&id)
		})
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := t.exec(qLeaseDelivery, holder, nanos(now.Add(lease)), id); err != nil {
				return err
			}
			d, err := scanDelivery(t.queryRow(qGetDelivery, id))
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

func finishDelivery(ctx context.Context, e engine, holder string, d webhooks.Delivery) error {
	return e.writeTx(ctx, "finish webhook delivery "+d.ID, func(t tx) error {
		n, err := t.exec(qFinishDelivery, d.State, d.Attempts, nanos(d.NextAt), d.LastStatus, d.LastError, nullNanos(d.DeliveredAt), d.ID, holder)
		if err == nil && n == 0 {
			return core.Errorf(core.KindConflict, "webhook delivery %s is no longer leased to this sender", d.ID)
		}
		return err
	})
}

func releaseDeliveries(ctx context.Context, e engine, holder string) error {
	return e.writeTx(ctx, "release webhook deliveries", func(t tx) error {
		_, err := t.exec(qReleaseDeliveries, holder)
		return err
	})
}

func pruneDeliveries(ctx context.Context, e engine, before time.Time, limit int) (int, error) {
	var n int64
	err := e.writeTx(ctx, "prune webhook deliveries", func(t tx) error {
		var err error
		n, err = t.exec(qPruneDeliveries, nanos(before), limit)
		return err
	})
	return int(n), err
}

func hookDeliveries(ctx context.Context, e engine, webhookID string, limit int) ([]webhooks.Delivery, error) {
	r, err := e.rowsOf(ctx, qHookDeliveries, webhookID, limit)
	if err != nil {
		return nil, e.wrapErr("list webhook deliveries", err)
	}
	list, err := scanRows(r, scanDelivery)
	if err != nil {
		return nil, e.wrapErr("list webhook deliveries", err)
	}
	return list, nil
}

func outboxDepth(ctx context.Context, e engine) (pending, failed int, err error) {
	var p, f int64
	if err := e.row(ctx, qOutboxDepth).Scan(&p, &f); err != nil {
		return 0, 0, e.wrapErr("count webhook outbox", err)
	}
	return int(p), int(f), nil
}

// PutWebhook: see webhooks.Store.
func (s *Store) PutWebhook(ctx context.Context, h webhooks.Hook) error { return putWebhook(ctx, s, h) }

// Webhook: see webhooks.Store.
func (s *Store) Webhook(ctx context.Context, id string) (webhooks.Hook, error) {
	return getWebhook(ctx, s, id)
}

// Webhooks: see webhooks.Store.
func (s *Store) Webhooks(ctx context.Context, owner string) ([]webhooks.Hook, error) {
	return listWebhooks(ctx, s, "list webhooks", qOwnerWebhooks, owner)
}

// DeleteWebhook: see webhooks.Store.
func (s *Store) DeleteWebhook(ctx context.Context, id string) error { return deleteWebhook(ctx, s, id) }

// WebhooksFor: see webhooks.Store.
func (s *Store) WebhooksFor(ctx context.Context, owner, accountID string, shared bool) ([]webhooks.Hook, error) {
	return listWebhooks(ctx, s, "find webhooks", qWebhooksFor, owner, accountID, shared, accountID, owner)
}

// Enqueue: see webhooks.Store.
func (s *Store) Enqueue(ctx context.Context, ds []webhooks.Delivery) (int, error) {
	return enqueue(ctx, s, ds)
}

// ClaimDeliveries: see webhooks.Store.
func (s *Store) ClaimDeliveries(ctx context.Context, holder string, now time.Time, lease time.Duration, limit int) ([]webhooks.Delivery, error) {
	return claimDeliveries(ctx, s, holder, now, lease, limit)
}

// FinishDelivery: see webhooks.Store.
func (s *Store) FinishDelivery(ctx context.Context, holder string, d webhooks.Delivery) error {
	return finishDelivery(ctx, s, holder, d)
}

// ReleaseDeliveries: see webhooks.Store.
func (s *Store) ReleaseDeliveries(ctx context.Context, holder string) error {
	return releaseDeliveries(ctx, s, holder)
}

// Deliveries: see webhooks.Store.
func (s *Store) Deliveries(ctx context.Context, webhookID string, limit int) ([]webhooks.Delivery, error) {
	return hookDeliveries(ctx, s, webhookID, limit)
}

// PruneDeliveries: see webhooks.Store.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	return pruneDeliveries(ctx, s, before, limit)
}

// OutboxDepth: see webhooks.Store.
func (s *Store) OutboxDepth(ctx context.Context) (int, int, error) { return outboxDepth(ctx, s) }

// PutWebhook: see webhooks.Store.
func (s *PGStore) PutWebhook(ctx context.Context, h webhooks.Hook) error {
	return putWebhook(ctx, s, h)
}

// Webhook: see webhooks.Store.
func (s *PGStore) Webhook(ctx context.Context, id string) (webhooks.Hook, error) {
	return getWebhook(ctx, s, id)
}

// Webhooks: see webhooks.Store.
func (s *PGStore) Webhooks(ctx context.Context, owner string) ([]webhooks.Hook, error) {
	return listWebhooks(ctx, s, "list webhooks", qOwnerWebhooks, owner)
}

// DeleteWebhook: see webhooks.Store.
func (s *PGStore) DeleteWebhook(ctx context.Context, id string) error {
	return deleteWebhook(ctx, s, id)
}

// WebhooksFor: see webhooks.Store.
func (s *PGStore) WebhooksFor(ctx context.Context, owner, accountID string, shared bool) ([]webhooks.Hook, error) {
	return listWebhooks(ctx, s, "find webhooks", qWebhooksFor, owner, accountID, shared, accountID, owner)
}

// Enqueue: see webhooks.Store.
func (s *PGStore) Enqueue(ctx context.Context, ds []webhooks.Delivery) (int, error) {
	return enqueue(ctx, s, ds)
}

// ClaimDeliveries: see webhooks.Store.
func (s *PGStore) ClaimDeliveries(ctx context.Context, holder string, now time.Time, lease time.Duration, limit int) ([]webhooks.Delivery, error) {
	return claimDeliveries(ctx, s, holder, now, lease, limit)
}

// FinishDelivery: see webhooks.Store.
func (s *PGStore) FinishDelivery(ctx context.Context, holder string, d webhooks.Delivery) error {
	return finishDelivery(ctx, s, holder, d)
}

// ReleaseDeliveries: see webhooks.Store.
func (s *PGStore) ReleaseDeliveries(ctx context.Context, holder string) error {
	return releaseDeliveries(ctx, s, holder)
}

// Deliveries: see webhooks.Store.
func (s *PGStore) Deliveries(ctx context.Context, webhookID string, limit int) ([]webhooks.Delivery, error) {
	return hookDeliveries(ctx, s, webhookID, limit)
}

// PruneDeliveries: see webhooks.Store.
func (s *PGStore) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	return pruneDeliveries(ctx, s, before, limit)
}

// OutboxDepth: see webhooks.Store.
func (s *PGStore) OutboxDepth(ctx context.Context) (int, int, error) { return outboxDepth(ctx, s) }
