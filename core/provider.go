package core

import "context"

// Provider is one adapter: the code that speaks one provider's API. Built-in
// Go adapters and sandboxed Wasm modules both implement it.
//
// Every method takes the account whose credentials to use; adapters that
// need a secret fetch it themselves (the Wasm host injects it into requests
// so the module never sees it). Methods return *Error values so callers can
// tell not_found from rate_limited without parsing text.
//
// Rules 1 and 2 of DESIGN.md bind every adapter: List and Get talk to the
// provider's API only, and read from inside a box (its agent-server) only
// while the box is running and only through endpoints that do not reset its
// idle clock.
type Provider interface {
	// Describe returns the adapter's name, version and capabilities. It may
	// block while a Wasm module finishes compiling.
	Describe(ctx context.Context) (ProviderInfo, error)
	// List returns every box of the account that this adapter manages.
	List(ctx context.Context, acct Account) ([]Box, error)
	// Get returns one box; a KindNotFound error if it no longer exists.
	Get(ctx context.Context, acct Account, boxID string) (Box, error)
	// Create makes a new box labelled with spec.WorkspaceID. Creating twice
	// for the same workspace must not make two boxes: an adapter returns
	// the existing one (or a KindConflict error the caller resolves by List).
	Create(ctx context.Context, acct Account, spec CreateSpec) (Box, error)
	// Suspend pauses a box. Suspending a paused box succeeds.
	Suspend(ctx context.Context, acct Account, boxID string) (Box, error)
	// Resume wakes a box. The returned box may have a new ID, URL and key.
	// Resuming a running box succeeds.
	Resume(ctx context.Context, acct Account, boxID string) (Box, error)
	// Delete destroys a box. Deleting a box that is already gone succeeds.
	Delete(ctx context.Context, acct Account, boxID string) error
}

// CreateSpec is what a new box should be.
type CreateSpec struct {
	// WorkspaceID is put on the box as LabelWorkspace.
	WorkspaceID string
	// Owner is the user the box is made for; on a shared account the
	// adapter puts it on the box as LabelOwner where it has labels.
	Owner     string
	Name      string
	Lifecycle Lifecycle
	// Options are provider-specific (image, template, region, ...).
	Options map[string]string
	// AgentKey is the agent-server session key companion generated for
	// this box (kept in the secrets store by workspace). Adapters set it in
	// the box's environment where the provider allows it; empty means the
	// adapter may make its own. A secret: never log it or put it in labels.
	AgentKey string
	// Progress, when not nil, takes a short line on what a slow step is
	// doing ("pulling image …: 40 of 120 MB"); it is shown on the
	// workspace. Call it only from within Create, never after it returns.
	Progress func(line string)
}

// Pinger is implemented by adapters that can tell cheaply whether their
// provider is reachable (the local Docker Engine, say). The reason in the
// error is shown to people.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Preparer is implemented by adapters with a one-time local cost before
// their first call (a Wasm module compiles at its first use). Adding an
// account waits for Prepare before it starts timing the provider's first
// answer (Config.AddAccountWait), which is about the provider, not about
// this machine.
type Preparer interface {
	Prepare(ctx context.Context) error
}

// CreateChecker is implemented by adapters that can tell quickly, before a
// create is recorded, that this create would fail (an unreachable engine,
// an image that cannot be had), so the caller hears it at once instead of
// after a 202. Before a create it is asked instead of Pinger: a provider
// unavailable for its defaults may still serve a create that overrides
// them.
type CreateChecker interface {
	CheckCreate(ctx context.Context, acct Account, spec CreateSpec) error
}
