package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// Actors name who asked for an audited action. Person-initiated requests
// carry the actor of the route they came in by (WithActor); work companion
// does on its own names the part of companion that did it.
const (
	ActorDesktopToken = "desktop token"
	ActorServeLocal   = "serve local"
	ActorReconciler   = "reconciler"
	ActorRetention    = "retention"
	// ActorRecovery finishes an action that a crash interrupted; who asked
	// for it was recorded in the action's "started" entry.
	ActorRecovery = "recovery"
)

// Audit actions.
const (
	AuditCreate        = "create"
	AuditPause         = "pause"
	AuditResume        = "resume"
	AuditDelete        = "delete"
	AuditAccountAdd    = "account_add"
	AuditAccountRemove = "account_remove"
	// AuditAdopt: the reconciler found a box companion did not create
	// and made a workspace of it.
	AuditAdopt = "adopt"
)

// AuditEntry is one row of the audit trail. Hash is the SHA-256 (hex) of
// PrevHash and the entry's canonical content (AuditContent), so an edited,
// removed or reordered row breaks the chain. No field ever holds a secret.
type AuditEntry struct {
	ID          int64     `json:"id"`
	At          time.Time `json:"at"`
	Owner       string    `json:"-"`
	Actor       string    `json:"actor"`
	Action      string    `json:"action"`
	WorkspaceID string    `json:"workspace_id,omitempty"`
	AccountID   string    `json:"account_id,omitempty"`
	Provider    string    `json:"provider,omitempty"`
	// Outcome is "started", "ok" or "failed: <reason>".
	Outcome string `json:"outcome"`
	// ExportSHA256 is the verified export a delete relied on, when any.
	ExportSHA256 string `json:"export_sha256,omitempty"`
	PrevHash     string `json:"prev_hash"`
	Hash         string `json:"hash"`
}

// AuditLog is the append-only, hash-chained audit trail. db implements it.
type AuditLog interface {
	// AppendAudit gives e the next id, chains it to the last entry and
	// stores it, in one transaction.
	AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error)
	// ListAudit pages the entries of owner newest first: those with an id
	// below before (0: from the newest), at most limit of them.
	ListAudit(ctx context.Context, owner string, before int64, limit int) ([]AuditEntry, error)
}

// AuditContent is the canonical byte form of an entry that its hash covers:
// every field but the hashes, in a fixed order, times as UTC unix
// nanoseconds. Changing it breaks every existing chain.
func AuditContent(e AuditEntry) []byte {
	fields := []string{
		strconv.FormatInt(e.ID, 10), strconv.FormatInt(e.At.UnixNano(), 10), e.Owner, e.Actor, e.Action,
		e.WorkspaceID, e.AccountID, e.Provider, e.Outcome, e.ExportSHA256,
	}
	b, _ := json.Marshal(fields) // a []string always marshals
	return b
}

// AuditHash is the chain hash of e given the previous entry's hash.
func AuditHash(prev string, e AuditEntry) string {
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write([]byte{'\n'})
	h.Write(AuditContent(e))
	return hex.EncodeToString(h.Sum(nil))
}

type actorKey struct{}

// WithActor returns ctx carrying who asks for the actions made with it.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf returns the actor WithActor put on ctx, or def.
func ActorOf(ctx context.Context, def string) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return def
}

// audit appends an entry; a failure is logged, never fails the action: the
// action already happened at the provider, and refusing to report it would
// only hide it.
func (s *Service) audit(ctx context.Context, e AuditEntry) {
	if s.cfg.Audit == nil {
		s.observer().Audited(e)
		return
	}
	e.At = s.now()
	s.observer().Audited(e)
	if _, err := s.cfg.Audit.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		s.log.Error("could not append to the audit trail", "action", e.Action, "workspace", e.WorkspaceID, "err", err)
	}
}

// Audit pages the audit trail of owner, newest first.
func (s *Service) Audit(ctx context.Context, owner string, before int64, limit int) ([]AuditEntry, error) {
	if s.cfg.Audit == nil {
		return []AuditEntry{}, nil
	}
	if before < 0 {
		return nil, Errorf(KindInvalid, "before must be a positive entry id, not %d", before)
	}
	if limit <= 0 || limit > MaxAuditPage {
		return nil, Errorf(KindInvalid, "limit must be between 1 and %d, not %d", MaxAuditPage, limit)
	}
	return s.cfg.Audit.ListAudit(ctx, owner, before, limit)
}

// MaxAuditPage is the most entries one Audit call returns.
const MaxAuditPage = 500

// rememberActor notes who started a running journaled action, so its
// outcome entry names them too.
func (s *Service) rememberActor(opID int64, actor string) {
	s.actorsMu.Lock()
	s.actors[opID] = actor
	s.actorsMu.Unlock()
}

// actorOf is who asked for journaled action opID, leaving it for
// takeActor.
func (s *Service) actorOf(opID int64) string {
	s.actorsMu.Lock()
	defer s.actorsMu.Unlock()
	if a, ok := s.actors[opID]; ok {
		return a
	}
	return ActorRecovery
}

func (s *Service) takeActor(opID int64) string {
	s.actorsMu.Lock()
	defer s.actorsMu.Unlock()
	a, ok := s.actors[opID]
	delete(s.actors, opID)
	if !ok {
		return ActorRecovery
	}
	return a
}

func opAudit(k OpKind) string {
	switch k {
	case OpCreate:
		return AuditCreate
	case OpPause:
		return AuditPause
	case OpResume:
		return AuditResume
	case OpDelete:
		return AuditDelete
	case OpExport:
		return AuditExport
	case OpRestore:
		return AuditRestore
	}
	return string(k)
}

func outcomeOf(err error) string {
	if err == nil {
		return "ok"
	}
	return "failed: " + messageOf(err)
}

// withNote adds a note to an outcome: "ok (note)".
func withNote(outcome, note string) string {
	if note == "" {
		return outcome
	}
	return outcome + " (" + note + ")"
}
