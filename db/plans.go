package db

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/canvasapp/companion/core"
)

// PutPlan records a delete preview for an existing workspace (unknown
// workspace: KindNotFound). Writing one also drops every expired plan, so
// abandoned previews do not pile up.
func (s *Store) PutPlan(ctx context.Context, p core.DeletePlan) error {
	if p.TokenHash == "" {
		return core.Errorf(core.KindInvalid, "a delete plan needs a token hash")
	}
	if p.ExpiresAt.IsZero() {
		return core.Errorf(core.KindInvalid, "a delete plan needs an expiry time")
	}
	var e enc
	args := []any{p.TokenHash, p.WorkspaceID, string(p.State), p.BoxID,
		e.time("last_activity_at", p.LastActivityAt), e.time("created_at", p.CreatedAt), e.time("expires_at", p.ExpiresAt)}
	if e.err != nil {
		return e.err
	}
	return s.write(ctx, "put delete plan for workspace "+p.WorkspaceID, func(t txn) error {
		var one int
		err := t.queryRow(`SELECT 1 FROM workspaces WHERE id = ?`, p.WorkspaceID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("workspace", p.WorkspaceID)
		}
		if err != nil {
			return err
		}
		if _, err := t.exec(`DELETE FROM plans WHERE expires_at <= ?`, nanos(s.now())); err != nil {
			return err
		}
		_, err = t.exec(`INSERT OR REPLACE INTO plans
			(token_hash, workspace_id, state, box_id, last_activity_at, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, args...)
		return err
	})
}

// TakePlan returns the plan for tokenHash and workspaceID and deletes it in
// the same transaction, so a token confirms at most one delete even when
// two requests race. A token sent for another workspace is not spent. A
// plan is valid while now is before its ExpiresAt; an unknown, used or
// expired token is a KindNotFound error. Every plan expired at now is
// dropped on the way, whether or not tokenHash matched.
func (s *Store) TakePlan(ctx context.Context, tokenHash, workspaceID string, now time.Time) (core.DeletePlan, error) {
	var (
		p     core.DeletePlan
		found bool
	)
	err := s.write(ctx, "take delete plan", func(t txn) error {
		if _, err := t.exec(`DELETE FROM plans WHERE expires_at <= ?`, nanos(now)); err != nil {
			return err
		}
		var err error
		p, err = scanTakenPlan(t.queryRow(`DELETE FROM plans WHERE token_hash = ? AND workspace_id = ?
			RETURNING `+takenPlanCols, tokenHash, workspaceID))
		if errors.Is(err, sql.ErrNoRows) {
			return nil // commit the pruning all the same
		}
		found = err == nil
		return err
	})
	if err != nil {
		return core.DeletePlan{}, err
	}
	if !found {
		return core.DeletePlan{}, core.Errorf(core.KindNotFound, "delete confirmation not found: it is unknown, was already used or expired")
	}
	return p, nil
}

// takenPlanCols are the columns scanTakenPlan reads, in its order.
const takenPlanCols = `token_hash, workspace_id, state, box_id, last_activity_at, created_at, expires_at`

// scanTakenPlan reads the plan a TakePlan's DELETE … RETURNING gave back,
// the same on both engines.
func scanTakenPlan(r scanner) (core.DeletePlan, error) {
	var (
		p                          core.DeletePlan
		state                      string
		activity, created, expires sql.NullInt64
	)
	if err := r.Scan(&p.TokenHash, &p.WorkspaceID, &state, &p.BoxID, &activity, &created, &expires); err != nil {
		return core.DeletePlan{}, err
	}
	p.State = core.State(state)
	p.LastActivityAt, p.CreatedAt, p.ExpiresAt = timeOf(activity), timeOf(created), timeOf(expires)
	return p, nil
}
