package core

import (
	"context"
	"fmt"
	"time"

	"github.com/canvasapp/companion/internal/units"
)

// DeletePreview tells a person exactly what a delete would destroy, and
// carries the token that confirms it.
type DeletePreview struct {
	Workspace Workspace
	// Token confirms this preview; it is valid once, until ExpiresAt.
	Token     string
	ExpiresAt time.Time
	// Lost and Survives are sentences for the confirmation dialog.
	Lost     []string
	Survives []string
}

// activityTolerance absorbs the jitter of last-activity figures derived from
// whole-second idle clocks, so a preview is not invalidated by rounding.
const activityTolerance = 2 * time.Second

// PreviewDelete plans the delete of a workspace: it re-reads the box's real
// state and records it, so that Delete can refuse if anything changed.
func (s *Service) PreviewDelete(ctx context.Context, owner, id string) (DeletePreview, error) {
	ws, acct, p, info, unlock, err := s.acquireForDelete(ctx, owner, id)
	if err != nil {
		return DeletePreview{}, err
	}
	defer unlock()
	if ws.BoxID != "" {
		if ws.State != StateDeleted && !info.Capabilities.Delete {
			return DeletePreview{}, Errorf(KindInvalid, "provider %s cannot delete boxes; delete it at the provider, then here", info.Name)
		}
		if ws, err = s.refresh(ctx, ws, acct, p); err != nil {
			return DeletePreview{}, err
		}
	}
	if !ws.State.canDelete() {
		return DeletePreview{}, illegal(ws, "delete")
	}
	now := s.now()
	token := newToken()
	plan := DeletePlan{
		TokenHash:      HashToken(token),
		WorkspaceID:    ws.ID,
		State:          ws.State,
		BoxID:          ws.BoxID,
		LastActivityAt: ws.LastActivityAt,
		CreatedAt:      now,
		ExpiresAt:      now.Add(s.cfg.PlanTTL),
	}
	if err := s.cfg.Store.PutPlan(ctx, plan); err != nil {
		return DeletePreview{}, err
	}
	lost, survives := consequences(ws, info)
	return DeletePreview{Workspace: ws, Token: token, ExpiresAt: plan.ExpiresAt, Lost: lost, Survives: survives}, nil
}

// consequences words what a delete destroys and what it leaves.
func consequences(ws Workspace, info ProviderInfo) (lost, survives []string) {
	if ws.State == StateDeleted {
		return []string{"companion's record of this workspace (the box is already gone)"}, nil
	}
	if ws.BoxID == "" {
		return noBoxConsequences(ws)
	}
	files := fmt.Sprintf("the box %s at %s and every file in it, including uncommitted work, installed dependencies and caches", ws.BoxID, ws.Provider)
	if ws.Size != nil {
		files += fmt.Sprintf(" (%s, %s as of %s)", units.Bytes(ws.Size.Bytes), ws.Size.Source, ws.Size.At.Format(time.RFC3339))
	}
	lost = append(lost, files)
	switch {
	case ws.State == StateRunning:
		lost = append(lost, "the memory of its running processes: anything not written to disk")
	case ws.State == StatePaused && info.Capabilities.SuspendKeepsMemory:
		lost = append(lost, "the memory state kept by the pause: its processes cannot be resumed")
	}
	lost = append(lost, "the agent's conversation history stored in the box: history export is not available yet, so it is not saved")
	survives = append(survives, "nothing inside the box; code you pushed to a remote repository is unaffected")
	return lost, survives
}

// Delete applies a preview. Under the workspace's lock it re-reads the box
// and refuses (KindConflict) if its state, identity or activity changed
// since the preview; otherwise it journals the delete and runs it in the
// background. A box that is already gone just removes the workspace.
func (s *Service) Delete(ctx context.Context, owner, id, token string) (Workspace, error) {
	if token == "" {
		return Workspace{}, Errorf(KindInvalid, "a confirmation token is required: ask for a delete preview first")
	}
	ws, acct, p, info, unlock, err := s.acquireForDelete(ctx, owner, id)
	if err != nil {
		return Workspace{}, err
	}
	release := true
	defer func() {
		if release {
			unlock()
		}
	}()
	plan, err := s.cfg.Store.TakePlan(ctx, HashToken(token), ws.ID, s.now())
	if IsKind(err, KindNotFound) {
		return Workspace{}, Errorf(KindInvalid, "the confirmation token is unknown, expired or already used for workspace %s: ask for a new delete preview", id)
	}
	if err != nil {
		return Workspace{}, err
	}
	if ws.BoxID == "" && ws.State != StateDeleted {
		if reason := changedSince(plan, ws); reason != "" {
			return Workspace{}, &Error{Kind: KindConflict, Message: fmt.Sprintf("workspace %s changed since the delete preview (%s); nothing was deleted: preview again", id, reason), State: ws.State}
		}
		box, found := s.leftoverBox(ctx, ws, acct, p, info)
		if !found {
			s.log.Info("workspace without a box removed", "workspace", ws.ID, "state", ws.State)
			ws.State, ws.Removed = StateDeleted, true
			saved, err := s.feed.Save(ctx, ws)
			if err == nil {
				s.forgetAgentKey(ctx, ws.ID)
			}
			return saved, err
		}
		// The failed create did make a box: delete it like any other.
		ws.BoxID, ws.BoxURL = box.ID, box.URL
		if ws, err = s.launch(ctx, ws, acct, OpDelete, StateDeleting, unlock); err != nil {
			return Workspace{}, err
		}
		release = false
		return ws, nil
	}
	if ws, err = s.refresh(ctx, ws, acct, p); err != nil {
		return Workspace{}, err
	}
	if ws.State == StateDeleted {
		// The box is already gone: only companion's record remains, and
		// removing it destroys nothing.
		ws.Removed = true
		saved, err := s.feed.Save(ctx, ws)
		if err == nil {
			s.forgetAgentKey(ctx, ws.ID)
			s.audit(ctx, AuditEntry{Owner: ws.Owner, Actor: ActorOf(ctx, ActorRecovery), Action: AuditDelete, WorkspaceID: ws.ID,
				AccountID: ws.AccountID, Provider: ws.Provider, Outcome: "ok (the box was already gone)"})
		}
		return saved, err
	}
	if reason := changedSince(plan, ws); reason != "" {
		return Workspace{}, &Error{Kind: KindConflict, Message: fmt.Sprintf("workspace %s changed since the delete preview (%s); nothing was deleted: preview again", id, reason), State: ws.State}
	}
	if ws, err = s.launch(ctx, ws, acct, OpDelete, StateDeleting, unlock); err != nil {
		return Workspace{}, err
	}
	release = false
	return ws, nil
}

// changedSince says how ws differs from what the plan saw, or "".
func changedSince(plan DeletePlan, ws Workspace) string {
	switch {
	case ws.State != plan.State:
		return fmt.Sprintf("it was %s and is now %s", plan.State, ws.State)
	case ws.BoxID != plan.BoxID:
		return fmt.Sprintf("its box changed from %s to %s", plan.BoxID, ws.BoxID)
	case ws.LastActivityAt.After(plan.LastActivityAt.Add(activityTolerance)):
		return "it was used since"
	}
	return ""
}
