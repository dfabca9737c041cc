package db

import (
	"context"
	"time"
)

// A webhook's secret rotation (webhooks.Store): only when the previous
// secret stops being accepted is kept here; the secrets are in the secret
// store.

const (
	qSetPreviousSecret = `UPDATE webhooks SET previous_secret_until = ? WHERE id = ?`
	// Conditional, so that a sender that saw one rotation's grace end
	// cannot clear the next rotation's.
	qExpirePreviousSecret = `UPDATE webhooks SET previous_secret_until = NULL WHERE id = ? AND previous_secret_until = ?`
)

func setPreviousSecret(ctx context.Context, e engine, id string, until time.Time) error {
	return e.writeTx(ctx, "set webhook "+id+"'s previous secret", func(t tx) error {
		n, err := t.exec(qSetPreviousSecret, nullNanos(until), id)
		if err == nil && n == 0 {
			return notFound("webhook", id)
		}
		return err
	})
}

func expirePreviousSecret(ctx context.Context, e engine, id string, until time.Time) (bool, error) {
	var n int64
	err := e.writeTx(ctx, "expire webhook "+id+"'s previous secret", func(t tx) error {
		var err error
		n, err = t.exec(qExpirePreviousSecret, id, nanos(until))
		return err
	})
	return n > 0, err
}

// SetPreviousSecret: see webhooks.Store.
func (s *Store) SetPreviousSecret(ctx context.Context, id string, until time.Time) error {
	return setPreviousSecret(ctx, s, id, until)
}

// ExpirePreviousSecret: see webhooks.Store.
func (s *Store) ExpirePreviousSecret(ctx context.Context, id string, until time.Time) (bool, error) {
	return expirePreviousSecret(ctx, s, id, until)
}

// SetPreviousSecret: see webhooks.Store.
func (s *PGStore) SetPreviousSecret(ctx context.Context, id string, until time.Time) error {
	return setPreviousSecret(ctx, s, id, until)
}

// ExpirePreviousSecret: see webhooks.Store.
func (s *PGStore) ExpirePreviousSecret(ctx context.Context, id string, until time.Time) (bool, error) {
	return expirePreviousSecret(ctx, s, id, until)
}
