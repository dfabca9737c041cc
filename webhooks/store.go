// Package webhooks sends companion's notifications (core.Event) to the
// URLs people register: signed with HMAC-SHA256, from a durable outbox in
// the store, retried with backoff, each delivery visible. See
// docs/webhooks.md.
package webhooks

import (
	"context"
	"time"
)

// Hook is one registered webhook. Its signing secret is in the secret
// store under SecretKey(ID), never in the store; so is its previous one,
// under PreviousSecretKey(ID), after a rotation.
type Hook struct {
	ID    string
	Owner string
	// AccountID limits the hook to one account's events; "" hears of all
	// of Owner's workspaces and accounts.
	AccountID string
	URL       string
	Events    []string
	CreatedAt time.Time
	// PreviousSecretUntil is when the secret a rotation replaced stops
	// signing deliveries; zero: there is none.
	PreviousSecretUntil time.Time
}

// Wants reports whether h subscribed to events of kind.
func (h Hook) Wants(kind string) bool {
	for _, k := range h.Events {
		if k == kind {
			return true
		}
	}
	return false
}

// Delivery states.
const (
	StatePending   = "pending"
	StateDelivered = "delivered"
	StateFailed    = "failed"
)

// Delivery is one event for one hook: a row of the outbox.
type Delivery struct {
	ID        string
	WebhookID string
	EventID   string
	Event     string
	// Payload is the exact body sent, the same at every attempt.
	Payload   []byte
	CreatedAt time.Time
	State     string
	Attempts  int
	// NextAt is when a pending delivery is next tried.
	NextAt time.Time
	// Holder and LeaseUntil: the sender that claimed it, until when.
	Holder      string
	LeaseUntil  time.Time
	LastStatus  int
	LastError   string
	DeliveredAt time.Time
}

// Store keeps hooks and the outbox. db implements it on SQLite and
// PostgreSQL alike.
type Store interface {
	PutWebhook(ctx context.Context, h Hook) error
	// Webhook returns one hook; unknown: a core KindNotFound error.
	Webhook(ctx context.Context, id string) (Hook, error)
	// Webhooks lists owner's hooks, oldest first.
	Webhooks(ctx context.Context, owner string) ([]Hook, error)
	// SetPreviousSecret sets when the hook's previous secret stops being
	// used (zero: it is not used); unknown hook: KindNotFound.
	SetPreviousSecret(ctx context.Context, id string, until time.Time) error
	// ExpirePreviousSecret clears the hook's PreviousSecretUntil only if
	// it is still until, and reports whether it did.
	ExpirePreviousSecret(ctx context.Context, id string, until time.Time) (bool, error)
	// DeleteWebhook removes a hook and its deliveries.
	DeleteWebhook(ctx context.Context, id string) error
	// WebhooksFor returns the hooks an event about owner's thing on
	// accountID concerns: owner's hooks for every account or for that
	// one, and, when shared, every user's hooks for that account.
	WebhooksFor(ctx context.Context, owner, accountID string, shared bool) ([]Hook, error)
	// Enqueue inserts deliveries in one transaction; one whose
	// (WebhookID, EventID) is already there is left as it is. It returns
	// how many were new.
	Enqueue(ctx context.Context, ds []Delivery) (int, error)
	// ClaimDeliveries leases to holder, until now+lease, at most limit
	// pending deliveries that are due at now and that nobody holds an
	// unexpired lease on, soonest first.
	ClaimDeliveries(ctx context.Context, holder string, now time.Time, lease time.Duration, limit int) ([]Delivery, error)
	// FinishDelivery records an attempt's outcome (State, Attempts,
	// NextAt, LastStatus, LastError, DeliveredAt of d) and releases the
	// lease, if holder still holds it; otherwise it is a KindConflict
	// error and nothing changes.
	FinishDelivery(ctx context.Context, holder string, d Delivery) error
	// ReleaseDeliveries gives up holder's leases (at shutdown), so
	// another sender need not wait for them to expire.
	ReleaseDeliveries(ctx context.Context, holder string) error
	// Deliveries lists a hook's deliveries, newest first, at most limit.
	Deliveries(ctx context.Context, webhookID string, limit int) ([]Delivery, error)
	// PruneDeliveries forgets at most limit delivered or failed
	// deliveries made before before, oldest first, and returns how many.
	PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error)
	// OutboxDepth counts pending and failed deliveries.
	OutboxDepth(ctx context.Context) (pending, failed int, err error)
}
