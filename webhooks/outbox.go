package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
)

var _ core.EventSink = (*Hooks)(nil)

// Payload is the JSON body of a delivery.
type Payload struct {
	ID        string      `json:"id"`
	Type      string      `json:"type"`
	CreatedAt time.Time   `json:"created_at"`
	Data      PayloadData `json:"data"`
}

// PayloadData is what an event says; fields that do not apply to an
// event's type are left out.
type PayloadData struct {
	WorkspaceID   string `json:"workspace_id,omitempty"`
	WorkspaceName string `json:"workspace_name,omitempty"`
	AccountID     string `json:"account_id,omitempty"`
	Provider      string `json:"provider,omitempty"`
	// retention.warning
	DeleteAfter      *time.Time `json:"delete_after,omitempty"`
	KeepURL          string     `json:"keep_url,omitempty"`
	KeepURLExpiresAt *time.Time `json:"keep_url_expires_at,omitempty"`
	// delete.done, export.failed
	Export *PayloadExport `json:"export,omitempty"`
	// account.unhealthy
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	Reason        string     `json:"reason,omitempty"`
}

// PayloadExport names an export: where to get it (with the owner's
// credentials) and, verified, its archive's SHA-256.
type PayloadExport struct {
	ID            string `json:"id"`
	URL           string `json:"url"`
	ArchiveSHA256 string `json:"archive_sha256,omitempty"`
}

// Emit stores a delivery of e for every webhook it concerns, in one
// transaction; an event already stored (same id) is not stored again. It
// implements core.EventSink.
func (h *Hooks) Emit(ctx context.Context, e core.Event) error {
	hooks, err := h.cfg.Store.WebhooksFor(ctx, e.Owner, e.AccountID, e.AccountShared)
	if err != nil {
		return fmt.Errorf("find the webhooks of event %s: %w", e.Kind, err)
	}
	var ds []Delivery
	now := h.cfg.Now().UTC()
	var body []byte
	for _, hook := range hooks {
		if !hook.Wants(e.Kind) {
			continue
		}
		if body == nil {
			if body, err = h.payload(ctx, e); err != nil {
				return err
			}
		}
		ds = append(ds, Delivery{ID: core.NewID("dlv"), WebhookID: hook.ID, EventID: e.ID, Event: e.Kind, Payload: body,
			CreatedAt: now, State: StatePending, NextAt: now})
	}
	if len(ds) == 0 {
		return nil
	}
	n, err := h.cfg.Store.Enqueue(ctx, ds)
	if err != nil {
		return fmt.Errorf("store the deliveries of event %s: %w", e.Kind, err)
	}
	if n > 0 {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

func (h *Hooks) payload(ctx context.Context, e core.Event) ([]byte, error) {
	at := wireTime(e.At)
	if e.At.IsZero() {
		at = wireTime(h.cfg.Now())
	}
	p := Payload{ID: e.ID, Type: e.Kind, CreatedAt: at, Data: PayloadData{WorkspaceID: e.WorkspaceID, WorkspaceName: e.WorkspaceName,
		AccountID: e.AccountID, Provider: e.Provider, Reason: e.Reason}}
	base := strings.TrimRight(h.cfg.BaseURL(), "/")
	switch e.Kind {
	case core.EventRetentionWarning:
		da := wireTime(e.DeleteAfter)
		p.Data.DeleteAfter = &da
		tok, exp, err := h.keepToken(ctx, e.Owner, e.WorkspaceID, e.DeleteAfter)
		if err != nil {
			return nil, err
		}
		p.Data.KeepURL, p.Data.KeepURLExpiresAt = base+KeepPath+tok, &exp
	case core.EventDeleteDone, core.EventExportFailed:
		if e.ExportID != "" {
			p.Data.Export = &PayloadExport{ID: e.ExportID, URL: base + "/v1/exports/" + e.ExportID, ArchiveSHA256: e.ExportSHA256}
		}
	case core.EventAccountUnhealthy:
		if !e.NextAttemptAt.IsZero() {
			n := wireTime(e.NextAttemptAt)
			p.Data.NextAttemptAt = &n
		}
	}
	return json.Marshal(p)
}

// wireTime is a time as the API shows it (UTC, milliseconds), so that a
// payload's times compare equal to the same times read from the API.
func wireTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
