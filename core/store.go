package core

import (
	"context"
	"time"
)

// Store is the durable state core needs. db implements it on SQLite.
//
// All methods are safe for concurrent use. Lookups of unknown ids return an
// *Error of KindNotFound.
type Store interface {
	// InstanceID is a random id made when the store was first created. It
	// namespaces this installation's entries in shared places such as the
	// OS keyring.
	InstanceID(ctx context.Context) (string, error)

	PutAccount(ctx context.Context, a Account) error
	GetAccount(ctx context.Context, id string) (Account, error)
	ListAccounts(ctx context.Context) ([]Account, error)
	DeleteAccount(ctx context.Context, id string) error

	GetWorkspace(ctx context.Context, id string) (Workspace, error)
	// ListWorkspaces returns every workspace that is not a tombstone.
	ListWorkspaces(ctx context.Context) ([]Workspace, error)
	// SaveWorkspace inserts or replaces ws, giving it the next feed
	// revision in the same transaction, and returns it with Rev set. The
	// revision counter survives restarts and never goes back.
	SaveWorkspace(ctx context.Context, ws Workspace) (Workspace, error)
	// Changes returns the workspaces (tombstones included) saved after
	// since, in revision order, and the current revision. A store that
	// logs every revision (PostgreSQL, for its recent ones) returns each
	// of them, so a workspace saved twice appears twice; otherwise only
	// the latest revision of each changed workspace is returned.
	// complete is false when since is older than the oldest revision the
	// store can still account for (tombstones were pruned past it) or newer
	// than the current revision; the caller must then start from a snapshot.
	Changes(ctx context.Context, since int64) (changes []Workspace, rev int64, complete bool, err error)
	// PruneTombstones forgets tombstones removed before cutoff, keeping at
	// most keep of the newest, and moves the catch-up floor accordingly.
	PruneTombstones(ctx context.Context, cutoff time.Time, keep int) error

	// SetAccountFlag records a flag the reconciler raised on an account,
	// replacing its previous one; nil clears it. The flag goes with the
	// account. AccountFlags returns every flag by account id.
	SetAccountFlag(ctx context.Context, accountID string, f *AccountFlag) error
	AccountFlags(ctx context.Context) (map[string]AccountFlag, error)

	// Journal of multi-step actions.
	PutOp(ctx context.Context, op Op) (Op, error) // inserts when op.ID == 0
	DeleteOp(ctx context.Context, id int64) error
	PendingOps(ctx context.Context) ([]Op, error)

	// Delete previews.
	PutPlan(ctx context.Context, p DeletePlan) error
	// TakePlan returns the plan for token and workspaceID and marks it
	// used, atomically. A used, expired or unknown token, or one issued for
	// another workspace (which stays usable), is a KindNotFound error.
	TakePlan(ctx context.Context, tokenHash, workspaceID string, now time.Time) (DeletePlan, error)
}

// OpKind names a journaled action.
type OpKind string

const (
	OpCreate OpKind = "create"
	OpPause  OpKind = "pause"
	OpResume OpKind = "resume"
	OpDelete OpKind = "delete"
)

// Op is one journaled multi-step action. It is written before the first
// step and deleted after the last; one left behind by a crash is resumed at
// start-up. Every step is idempotent, so redoing a step that had completed
// is harmless.
type Op struct {
	ID          int64
	WorkspaceID string
	Kind        OpKind
	// Step is the last step known to have started.
	Step      string
	Attempts  int
	LastError string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Delete is the delete pipeline's own record (OpDelete only): what
	// the delete saw when asked, and which export it relies on.
	Delete *DeleteJournal
}

// DeletePlan is a delete preview. A person confirms it by sending back its
// token; at apply time the workspace is re-read and the delete is refused if
// it changed since.
type DeletePlan struct {
	// TokenHash is the SHA-256 of the confirmation token, hex; the token
	// itself is only ever given to the person who asked for the preview.
	TokenHash   string
	WorkspaceID string
	// Observed state at preview time; apply refuses if it differs.
	State          State
	BoxID          string
	LastActivityAt time.Time
	CreatedAt      time.Time
	ExpiresAt      time.Time
}
