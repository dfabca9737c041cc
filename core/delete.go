package core

import (
	"context"
	"fmt"
	"strings"
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
	// Export is what the delete will export first.
	Export DeleteExportPlan
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
	ex := s.exportPlan(ws, acct, p, info)
	lost, survives := consequences(ws, info, ex)
	return DeletePreview{Workspace: ws, Token: token, ExpiresAt: plan.ExpiresAt, Lost: lost, Survives: survives, Export: ex}, nil
}

// consequences words what a delete destroys and what it leaves.
func consequences(ws Workspace, info ProviderInfo, ex DeleteExportPlan) (lost, survives []string) {
	if ws.State == StateDeleted {
		return []string{"companion's record of this workspace (the box is already gone)"}, nil
	}
	if ws.BoxID == "" {
		return noBoxConsequences(ws)
	}
	size := ""
	if ws.Size != nil {
		size = fmt.Sprintf(" (%s, %s as of %s)", units.Bytes(ws.Size.Bytes), ws.Size.Source, ws.Size.At.Format(time.RFC3339))
	}
	switch {
	case ex.Will && ex.Snapshot:
		lost = append(lost, fmt.Sprintf("the box %s at %s%s: its files survive in the export (the provider's snapshot holds its volumes and every path its container changed), except bind mounts, whose data is on the host",
			ws.BoxID, ws.Provider, size))
	case ex.Will:
		lost = append(lost, fmt.Sprintf("the box %s at %s%s: every file outside %s, and inside it what the agent-server never archives: %s",
			ws.BoxID, ws.Provider, size, ex.ArchivePath, strings.Join(NeverArchived(), ", ")))
	default:
		lost = append(lost, fmt.Sprintf("the box %s at %s and every file in it, including uncommitted work, installed dependencies and caches%s", ws.BoxID, ws.Provider, size))
	}
	switch {
	case ws.State == StateRunning:
		lost = append(lost, "the memory of its running processes: anything not written to disk")
	case ws.State == StatePaused && info.Capabilities.SuspendKeepsMemory:
		lost = append(lost, "the memory state kept by the pause: its processes cannot be resumed")
	case ws.State == StateStopped:
		// Stopped is not paused: its processes already ended, nothing
		// was kept in memory.
	}
	for _, c := range info.Clocks {
		// A provider that wipes a box's files on its own (Cloudflare's
		// sleep) may have done so already: the export can only hold what
		// the box has when it runs.
		if c.Loses == ClockLosesFiles {
			lost = append(lost, fmt.Sprintf("whatever %s's %s already wiped: an export holds only what the box has when it runs", ws.Provider, describeClock(c)))
		}
	}
	switch {
	case !ex.Will:
		lost = append(lost, "the agent's conversation history stored in the box: "+ex.Why+", so it is not saved")
	case ex.Mode == DeleteExportBestEffort:
		lost = append(lost, "if the export fails, everything in the box, conversation history included: this account's delete_export is best_effort, so the delete goes ahead without it")
	}
	if ex.Will {
		survives = append(survives, fmt.Sprintf("the export (%s), verified by size and SHA-256 before the box is deleted, in %s; listed under the workspace's exports and, once it is deleted, under deleted workspaces, where it can be downloaded and restored as a new workspace", strings.Join(ex.Captures, "; "), ex.Location))
		if ex.Mode == DeleteExportRequired {
			survives = append(survives, "everything, if the export cannot be made and verified: the delete is then blocked and the box stays (this account's delete_export is required)")
		}
	}
	survives = append(survives, "code you pushed to a remote repository")
	return lost, survives
}

// DeleteExportPlan is what a delete will export before it deletes.
type DeleteExportPlan struct {
	// Will is false when no export is made; Why says why.
	Will bool
	Why  string
	Mode DeleteExportMode
	// Captures names what the export holds.
	Captures []string
	// Format of the workspace archive.
	Format string
	// ArchivePath is the directory in the box that is archived.
	ArchivePath string
	// Wake is set when the box must be woken for the export.
	Wake bool
	// Snapshot is set when the export holds the provider's snapshot of
	// the box (Snapshotter) besides the agent-server's files.
	Snapshot bool
	// Location says where the export goes.
	Location string
}

// ArchivePath is the directory of a box that an export archives: the
// agent-server image's workspace.
const ArchivePath = "/workspace"

// NeverArchived names what the agent-server leaves out of every archive,
// whatever is asked (docs/agent-server-files.md), so no export holds it.
func NeverArchived() []string {
	return []string{"symbolic links and special files (sockets, pipes, devices)",
		"git's credential-bearing files (.git/config, .git/config.worktree, .git/credentials, .git/.git-credentials, .git/FETCH_HEAD) and reflogs (.git/logs/)"}
}

// exportPlan says what the delete of ws will export.
func (s *Service) exportPlan(ws Workspace, acct Account, p Provider, info ProviderInfo) DeleteExportPlan {
	ex := DeleteExportPlan{Mode: acct.DeleteExport.Effective(), Format: ArchiveTarGz, ArchivePath: ArchivePath}
	switch {
	case ws.BoxID == "" || ws.State == StateDeleted:
		ex.Why = "there is no box to export"
		return ex
	case ws.State == StateError:
		ex.Why = "its create never finished, so its box holds no work"
		return ex
	case !s.exportsConfigured():
		ex.Why = "exports are not configured in this companion"
		return ex
	}
	ex.Will = true
	ex.Captures = []string{"the trajectory of every conversation, a zip each",
		"every file and directory under " + ArchivePath + " as one " + ArchiveTarGz + " archive, with an index of each file's size and SHA-256 (when the agent-server narrows its archive to a repository, companion captures the rest of " + ArchivePath + " through its other routes)",
		"the uncommitted work of the repository in " + ArchivePath + " as a git-delta patch, when it holds one"}
	if _, ok := p.(Snapshotter); ok {
		ex.Snapshot = true
		ex.Captures = append(ex.Captures, "the provider's snapshot of the box (its volumes and every path its container changed)")
	}
	ex.Captures = append(ex.Captures, "a manifest.json with every file's size and SHA-256")
	ex.Location = "companion's export directory"
	if s.cfg.ExportLocation != "" {
		ex.Location = s.cfg.ExportLocation + "/" + ws.ID + "/"
	}
	if _, ok := p.(EndpointReporter); !ok {
		ex.Will = false
		ex.Why = fmt.Sprintf("provider %s cannot say where its boxes' agent-server is", info.Name)
		if ex.Mode == DeleteExportRequired {
			ex.Why += " (the delete will be blocked: export is required for this account)"
		}
		return ex
	}
	ex.Wake = ws.State == StatePaused || ws.State == StateStopped
	if ex.Wake {
		ex.Captures = append(ex.Captures, fmt.Sprintf("the box is %s: it is woken for the export, which bills and moves its idle clock", ws.State))
	}
	return ex
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
	case usedSince(ws.LastActivityAt, plan.LastActivityAt, plan.CreatedAt):
		return "it was used since"
	}
	return ""
}

// usedSince says whether activity (read now) shows use after a preview or
// a delete request made at asked, which had read seen. Idle clocks are read
// over the network and in whole seconds, so two readings of one idle box
// differ by up to the tolerance; activity dated well before the person
// asked is not use since, however the readings drift.
func usedSince(activity, seen, asked time.Time) bool {
	return activity.After(seen.Add(activityTolerance)) && activity.After(asked.Add(-activityTolerance))
}
