package db

import (
	"context"
	"database/sql"
	"time"

	"github.com/canvasapp/companion/core"
)

// PutPlan records a delete preview for an existing workspace (unknown
// workspace: KindNotFound). Writing one also drops every expired plan, so
// abandoned previews do not pile up.
func (s *Store) PutPlan(ctx context.Context, p core.DeletePlan) error { return putPlan(ctx, s, p) }

// PutPlan: see Store.PutPlan.
func (s *PGStore) PutPlan(ctx context.Context, p core.DeletePlan) error { return putPlan(ctx, s, p) }

func putPlan(ctx context.Context, e engine, p core.DeletePlan) error {
	if p.TokenHash == "" {
		return core.Errorf(core.KindInvalid, "a delete plan needs a token hash")
	}
	if p.ExpiresAt.IsZero() {
		return core.Errorf(core.KindInvalid, "a delete plan needs an expiry time")
	}
	var c enc
	args := []any{p.TokenHash, p.WorkspaceID, string(p.State), p.BoxID,
		c.time("last_activity_at", p.LastActivityAt), c.time("created_at", p.CreatedAt), c.time("expires_at", p.ExpiresAt)}
	if c.err != nil {
		return c.err
	}
	now := nanos(e.clock())
	return e.writeTx(ctx, "put delete plan for workspace "+p.WorkspaceID, func(t tx) error {
		var one int
		err := t.queryRow(`SELECT 1 FROM workspaces WHERE id = ?`, p.WorkspaceID).Scan(&one)
		if isNoRows(err) {
			return notFound("workspace", p.WorkspaceID)
		}
		if err != nil {
			return err
		}
		if _, err := t.exec(qPrunePlans, now); err != nil {
			return err
		}
		_, err = t.exec(`INSERT INTO plans
			(token_hash, workspace_id, state, box_id, last_activity_at, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (token_hash) DO UPDATE SET workspace_id = excluded.workspace_id, state = excluded.state,
				box_id = excluded.box_id, last_activity_at = excluded.last_activity_at,
				created_at = excluded.created_at, expires_at = excluded.expires_at`, args...)
		return err
	})
}

const qPrunePlans = `DELETE FROM plans WHERE expires_at <= ?`

// TakePlan returns the plan for tokenHash and workspaceID and deletes it in
// the same transaction (one DELETE … RETURNING), so a token confirms at
// most one delete even when two requests race, on one process or several
// replicas. A token sent for another workspace is not spent. A plan is
// valid while now is before its ExpiresAt; an unknown, used or expired
// token is a KindNotFound error. Every plan expired at now is dropped on
// the way, whether or not tokenHash matched.
func (s *Store) TakePlan(ctx context.Context, tokenHash, workspaceID string, now time.Time) (core.DeletePlan, error) {
	return takePlan(ctx, s, tokenHash, workspaceID, now)
}

// TakePlan: see Store.TakePlan.
func (s *PGStore) TakePlan(ctx context.Context, tokenHash, workspaceID string, now time.Time) (core.DeletePlan, error) {
	return takePlan(ctx, s, tokenHash, workspaceID, now)
}

func takePlan(ctx context.Context, e engine, tokenHash, workspaceID string, now time.Time) (core.DeletePlan, error) {
	var (
		p     core.DeletePlan
		found bool
	)
	err := e.writeTx(ctx, "take delete plan", func(t tx) error {
		if _, err := t.exec(qPrunePlans, nanos(now)); err != nil {
			return err
		}
		var err error
		p, err = scanTakenPlan(t.queryRow(`DELETE FROM plans WHERE token_hash = ? AND workspace_id = ?
			RETURNING `+takenPlanCols, tokenHash, workspaceID))
		if isNoRows(err) {
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
