package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/canvasapp/companion/core"
)

// PreviousSecretKey is where a hook's previous signing secret is in the
// secret store while a rotation's grace period lasts.
func PreviousSecretKey(id string) string { return SecretKey(id) + "/previous" }

// How long a rotation keeps the replaced secret signing deliveries.
const (
	DefaultPreviousValidFor = 24 * time.Hour
	MaxPreviousValidFor     = 7 * 24 * time.Hour
)

// Rotate gives one of owner's webhooks a new signing secret and returns
// the hook and the secret, which is shown this once. For previousValidFor
// every delivery is signed with the replaced secret too, so the receiver
// switches when it is ready; 0 stops the replaced secret at once. Only
// the secret just replaced is kept: an earlier rotation's is dropped.
func (h *Hooks) Rotate(ctx context.Context, owner, id string, previousValidFor time.Duration) (Hook, string, error) {
	if previousValidFor < 0 || previousValidFor > MaxPreviousValidFor {
		return Hook{}, "", core.Errorf(core.KindInvalid, "previous_valid_for must be from 0 to %d seconds (7 days)", int64(MaxPreviousValidFor/time.Second))
	}
	h.rotMu.Lock()
	defer h.rotMu.Unlock()
	hook, err := h.Get(ctx, owner, id)
	if err != nil {
		return Hook{}, "", err
	}
	old, err := h.cfg.Secrets.Get(ctx, SecretKey(id))
	if err != nil && !core.IsKind(err, core.KindNotFound) {
		return Hook{}, "", fmt.Errorf("read the webhook's signing secret: %w", err)
	}
	secret := newSecret()
	if previousValidFor == 0 || old == "" {
		// Senders stop using the previous secret before it is deleted.
		if err := h.cfg.Store.SetPreviousSecret(ctx, id, time.Time{}); err != nil {
			return Hook{}, "", err
		}
		if err := h.cfg.Secrets.Set(ctx, SecretKey(id), secret); err != nil {
			return Hook{}, "", fmt.Errorf("store the webhook's new signing secret: %w", err)
		}
		h.deletePrevious(ctx, id)
		hook.PreviousSecretUntil = time.Time{}
		return hook, secret, nil
	}
	until := h.cfg.Now().Add(previousValidFor).UTC()
	// The expiry first, then the old secret under its own key, then the
	// new one: a crash in between leaves deliveries signed with the old
	// secret (perhaps twice), never without it.
	if err := h.cfg.Store.SetPreviousSecret(ctx, id, until); err != nil {
		return Hook{}, "", err
	}
	if err := h.cfg.Secrets.Set(ctx, PreviousSecretKey(id), old); err != nil {
		return Hook{}, "", fmt.Errorf("keep the webhook's previous signing secret: %w", err)
	}
	if err := h.cfg.Secrets.Set(ctx, SecretKey(id), secret); err != nil {
		return Hook{}, "", fmt.Errorf("store the webhook's new signing secret: %w", err)
	}
	hook.PreviousSecretUntil = until
	return hook, secret, nil
}

// signingSecrets returns the secrets a delivery of hook is signed with
// now: its secret, then during a rotation's grace period the previous
// one. A previous secret past its time is dropped here. A hook without
// its secret is a KindNotFound error.
func (h *Hooks) signingSecrets(ctx context.Context, hook Hook) ([]string, error) {
	cur, err := h.cfg.Secrets.Get(ctx, SecretKey(hook.ID))
	if err != nil {
		return nil, fmt.Errorf("read the webhook's secret: %w", err)
	}
	out := []string{cur}
	if hook.PreviousSecretUntil.IsZero() {
		return out, nil
	}
	if !h.cfg.Now().Before(hook.PreviousSecretUntil) {
		h.expirePrevious(ctx, hook)
		return out, nil
	}
	prev, err := h.cfg.Secrets.Get(ctx, PreviousSecretKey(hook.ID))
	switch {
	case core.IsKind(err, core.KindNotFound):
		// Revoked or expired by another replica since hook was read.
	case err != nil:
		return nil, fmt.Errorf("read the webhook's previous secret: %w", err)
	case prev != cur:
		out = append(out, prev)
	}
	return out, nil
}

// expirePrevious drops hook's previous secret, whose grace period is
// over, unless a rotation has replaced it since.
func (h *Hooks) expirePrevious(ctx context.Context, hook Hook) {
	h.rotMu.Lock()
	defer h.rotMu.Unlock()
	ok, err := h.cfg.Store.ExpirePreviousSecret(ctx, hook.ID, hook.PreviousSecretUntil)
	if err != nil {
		h.log.Warn("could not expire a webhook's previous secret", "webhook", hook.ID, "err", err)
		return
	}
	if ok {
		h.deletePrevious(ctx, hook.ID)
	}
}

func (h *Hooks) deletePrevious(ctx context.Context, id string) {
	if err := h.cfg.Secrets.Delete(ctx, PreviousSecretKey(id)); err != nil && !core.IsKind(err, core.KindNotFound) {
		h.log.Warn("could not remove a webhook's previous secret", "webhook", id, "err", err)
	}
}
