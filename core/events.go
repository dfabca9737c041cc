package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Kinds of Event: what a notification (a webhook) reports.
const (
	// EventRetentionWarning: a workspace will be deleted at DeleteAfter
	// unless it is resumed or kept.
	EventRetentionWarning = "retention.warning"
	// EventDeleteDone: a workspace was deleted; ExportID and
	// ExportSHA256 name the verified export it left (empty when it was
	// deleted without one, Reason says why).
	EventDeleteDone = "delete.done"
	// EventDeleteBlocked: a delete stopped before the provider delete,
	// or the provider's delete failed; the box stays. Reason says why.
	EventDeleteBlocked = "delete.blocked"
	// EventExportFailed: an export failed; Reason says why.
	EventExportFailed = "export.failed"
	// EventAccountUnhealthy: the provider of an account stopped answering
	// its list; Reason says how, NextAttemptAt when it is tried again.
	EventAccountUnhealthy = "account.unhealthy"
)

// EventKinds lists every kind of Event, in a stable order.
var EventKinds = []string{EventRetentionWarning, EventDeleteDone, EventDeleteBlocked, EventExportFailed, EventAccountUnhealthy}

// Event is something the server did or is about to do that its owner may
// want to hear of when nobody watches the stream. Its ID is derived from
// what it reports, so the same fact reported twice (a step redone after a
// crash, two replicas at the same moment) has the same ID and is sent once.
type Event struct {
	ID   string
	Kind string
	At   time.Time
	// Owner is whose workspace or account it is about.
	Owner     string
	AccountID string
	// AccountShared: the account is shared, so its account events also
	// concern the users who subscribed to it.
	AccountShared bool
	WorkspaceID   string
	WorkspaceName string
	Provider      string
	DeleteAfter   time.Time // retention.warning
	ExportID      string    // delete.done, export.failed
	ExportSHA256  string    // delete.done
	NextAttemptAt time.Time // account.unhealthy
	Reason        string
}

// EventSink takes events durably: once Emit returned nil, the event is
// stored and will be delivered. The webhooks package implements it.
type EventSink interface {
	Emit(ctx context.Context, e Event) error
}

// EventID is the id of the event of kind about the fact named by parts.
func EventID(kind string, parts ...string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + strings.Join(parts, "\x00")))
	return "evt_" + hex.EncodeToString(h[:12])
}

// emit hands e to the sink, if any. It reports the sink's error; callers
// that can try again later (the retention tick) do, the others log it.
func (s *Service) emit(ctx context.Context, e Event) error {
	sink := s.cfg.Events
	if sink == nil {
		return nil
	}
	if e.At.IsZero() {
		e.At = s.now()
	}
	if err := sink.Emit(context.WithoutCancel(ctx), e); err != nil {
		s.log.Error("could not store a notification", "event", e.Kind, "workspace", e.WorkspaceID, "account", e.AccountID, "err", err)
		return err
	}
	return nil
}

// emitDeleteOutcome reports a finished delete run: done (the workspace is
// removed) or blocked. It is called after the outcome is saved and before
// the journal entry is dropped, so a crash in between redoes the last step
// and emits the same event (same id) again rather than none.
func (s *Service) emitDeleteOutcome(ctx context.Context, op Op, ws Workspace, cause error, outcome string) {
	if op.Kind != OpDelete || s.cfg.Events == nil {
		return
	}
	e := Event{Owner: ws.Owner, AccountID: ws.AccountID, WorkspaceID: ws.ID, WorkspaceName: ws.Name, Provider: ws.Provider}
	opID := strconv.FormatInt(op.ID, 10)
	switch {
	case ws.Removed && cause == nil:
		e.Kind = EventDeleteDone
		if j := op.Delete; j != nil {
			if j.Verified {
				e.ExportID, e.ExportSHA256 = j.ExportID, j.ExportSHA256
			}
			e.Reason = j.NoExport
		}
	case strings.HasPrefix(outcome, "blocked: "):
		e.Kind, e.Reason = EventDeleteBlocked, strings.TrimPrefix(outcome, "blocked: ")
	case cause != nil && !ws.Removed && strings.HasPrefix(outcome, "failed: "):
		// The provider's delete failed: the box stays, as when blocked.
		e.Kind, e.Reason = EventDeleteBlocked, strings.TrimPrefix(outcome, "failed: ")
	default:
		return
	}
	e.ID = EventID(e.Kind, ws.ID, opID)
	s.emit(ctx, e)
}
