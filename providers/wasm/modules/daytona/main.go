// Command daytona is companion's first-party provider module for Daytona
// sandboxes (https://app.daytona.io/api, or a self-hosted Daytona through
// the account's api_url). It is built and packed like any third party's
// module: the SDK, a manifest, nothing privileged.
//
// Mapping (reference: providers.md §1):
//
//	list     GET /sandbox, cursor pagination (nextCursor)
//	get      GET /sandbox/{id}
//	create   POST /sandbox with labels, autoStop/autoArchive/autoDelete intervals
//	suspend  POST /sandbox/{id}/stop  (files kept, memory not)
//	resume   POST /sandbox/{id}/start (also restores archived sandboxes)
//	delete   DELETE /sandbox/{id}
package main

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/canvasapp/companion/providers/wasm/modules/internal/api"
	"github.com/canvasapp/companion/providers/wasm/sdk"
)

const version = "1.0.0"

var caps = sdk.Capabilities{
	List:              true,
	LastActivity:      true, // lastActivityAt on every list item
	Suspend:           true,
	SuspendKeepsFiles: true,
	// Stop clears memory; Daytona's memory-keeping pause exists only for
	// VM classes, so the module does not rely on it.
	SuspendKeepsMemory: false,
	ResumeSameIdentity: true,
	Delete:             true,
	NativeIdlePause:    true, // autoStopInterval
	NativePausedTTL:    true, // autoDeleteInterval (see lifecycle)
}

// Deletion clocks (declared in manifest.json, "clocks"; providers.md §1):
//
//   - auto_delete: autoDeleteInterval deletes a sandbox that stayed
//     stopped (companion's paused) that long. Daytona's default is off, so
//     it runs only when companion sets it from the workspace's paused TTL
//     (lifecycle): a setting clock, starts "paused", loses the box. The
//     module never sends 0, which would make the box ephemeral (deleted
//     at its first stop).
//   - Auto-archive is not a deletion: autoArchiveInterval (default 7 days
//     stopped) moves the filesystem to object storage and start restores
//     it, more slowly. The box and its files survive, so it is no clock.

// Options a create may carry.
const (
	optSnapshot = "snapshot"
	optTarget   = "target"
)

type provider struct{}

func (provider) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "daytona", Version: version, Capabilities: &caps}, nil
}

func client(acct sdk.Account) api.Client {
	c := api.Client{Provider: "Daytona", Adjust: adjust}
	// A JWT (rather than an API key) needs the organization named.
	if org := acct.Config["organization_id"]; org != "" {
		c.Headers = map[string]string{"X-Daytona-Organization-ID": org}
	}
	return c
}

// adjust maps Daytona's state errors onto conflict. Wrong-state answers
// are 400 in every version read (SandboxError / SANDBOX_STATE_ERROR), and
// "state change in progress" was 400 in older versions and 409 in newer
// ones, so both readings end up as conflict.
func adjust(resp *sdk.Response, e *sdk.Error) {
	if resp.Status != 400 || e.Kind != sdk.Invalid {
		return
	}
	switch api.Code(resp.Body) {
	case "SANDBOX_STATE_ERROR", "SANDBOX_STATE_CHANGE_IN_PROGRESS":
		e.Kind = sdk.Conflict
		return
	}
	// Older, code-less state errors: "Sandbox is not started", "State
	// change in progress", "Sandbox is not in valid state".
	msg := strings.ToLower(api.Detail(resp.Body))
	for _, s := range []string{"sandbox is not", "state change in progress", "valid state"} {
		if strings.Contains(msg, s) {
			e.Kind = sdk.Conflict
		}
	}
}

// sandbox is the part of Daytona's Sandbox / SandboxListItem schema the
// module reads; everything else is ignored.
type sandbox struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	State        string            `json:"state"`
	DesiredState string            `json:"desiredState"`
	Labels       map[string]string `json:"labels"`
	Disk         float64           `json:"disk"` // GiB
	CreatedAt    api.Time          `json:"createdAt"`
	UpdatedAt    api.Time          `json:"updatedAt"`
	LastActivity api.Time          `json:"lastActivityAt"`
}

// state maps Daytona's SandboxState onto companion's states.
func state(s string) sdk.State {
	switch s {
	case "creating", "pending_build", "building_snapshot", "pulling_snapshot":
		return sdk.Creating
	case "started", "resizing", "snapshotting", "forking":
		return sdk.Running
	case "starting", "restoring", "resuming":
		return sdk.Resuming
	case "stopping", "pausing":
		return sdk.Pausing
	// archiving is a stopped box moving to cold storage: already paused.
	case "stopped", "archived", "archiving", "paused":
		return sdk.Paused
	case "destroying":
		return sdk.Deleting
	case "destroyed":
		return sdk.Deleted
	case "error", "build_failed":
		return sdk.Failed
	}
	return sdk.Unknown
}

func (s sandbox) box(now time.Time) sdk.Box {
	b := sdk.Box{
		ID:             s.ID,
		Name:           api.First(s.Labels[api.LabelName], s.Name),
		State:          state(s.State),
		Labels:         api.Labels(s.Labels),
		CreatedAt:      s.CreatedAt.Time,
		LastActivityAt: s.LastActivity.Time,
	}
	// Daytona has no paused-at field. updatedAt of a stopped box is when
	// it settled in stopped (or later, if something else changed), so it
	// never overstates the paused age. For archived boxes it is the
	// archive time, which would reset the age: leave it unknown and let
	// companion keep what it saw before.
	if s.State == "stopped" || s.State == "paused" {
		b.PausedAt = s.UpdatedAt.Time
	}
	if s.Disk > 0 {
		b.Size = &sdk.Size{Bytes: int64(s.Disk * (1 << 30)), Source: sdk.SizeAllocated, At: now}
	}
	return b
}

func (p provider) List(ctx context.Context, acct sdk.Account) ([]sdk.Box, error) {
	return p.list(ctx, acct, nil, 0)
}

// list pages through GET /sandbox. With labels it filters server-side;
// maxPages 0 means all pages.
func (provider) list(ctx context.Context, acct sdk.Account, labels map[string]string, maxPages int) ([]sdk.Box, error) {
	c := client(acct)
	var boxes []sdk.Box
	cursor := ""
	seen := map[string]bool{}
	for page := 1; ; page++ {
		q := url.Values{"limit": {"200"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if labels != nil {
			b, _ := json.Marshal(labels)
			q.Set("labels", string(b))
		}
		var res struct {
			Items      []sandbox `json:"items"`
			NextCursor *string   `json:"nextCursor"`
		}
		if _, err := c.Call(ctx, "GET", "/sandbox", q, nil, &res); err != nil {
			return nil, err
		}
		now := time.Now()
		for _, s := range res.Items {
			if s.ID != "" {
				boxes = append(boxes, s.box(now))
			}
		}
		if res.NextCursor == nil || *res.NextCursor == "" || (maxPages > 0 && page >= maxPages) {
			return boxes, nil
		}
		cursor = *res.NextCursor
		if page >= api.MaxPages {
			return nil, api.TooManyPages("Daytona", 200)
		}
		if seen[cursor] {
			return nil, sdk.Errorf(sdk.Unavailable, "Daytona returned the same list cursor twice; try again later")
		}
		seen[cursor] = true
	}
}

func (provider) get(ctx context.Context, acct sdk.Account, id string) (sandbox, error) {
	if err := api.CheckID(id); err != nil {
		return sandbox{}, err
	}
	var s sandbox
	_, err := client(acct).Call(ctx, "GET", "/sandbox/"+api.PathID(id), nil, nil, &s)
	if err != nil {
		return sandbox{}, api.NotFound(err, "Daytona sandbox", id)
	}
	return s, nil
}

func (p provider) Get(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	s, err := p.get(ctx, acct, id)
	if err != nil {
		return sdk.Box{}, err
	}
	return s.box(time.Now()), nil
}

// createBody is Daytona's CreateSandbox, the fields the module sets.
type createBody struct {
	Name                string            `json:"name,omitempty"`
	Snapshot            string            `json:"snapshot,omitempty"`
	Target              string            `json:"target,omitempty"`
	Labels              map[string]string `json:"labels"`
	Env                 map[string]string `json:"env,omitempty"`
	AutoStopInterval    *int64            `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval *int64            `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  *int64            `json:"autoDeleteInterval,omitempty"`
}

// maxArchive is what autoArchiveInterval 0 means: 30 days, in minutes.
const maxArchive = 30 * 24 * 60

// defaultArchive is Daytona's default autoArchiveInterval: 7 days.
const defaultArchive = 7 * 24 * 60

// lifecycle sets Daytona's native intervals (minutes) from companion's
// settings. Zero settings leave Daytona's defaults (auto-stop 15 min,
// archive after 7 days stopped, never delete).
//
//   - idle pause → autoStopInterval, at least 1 (0 would disable it).
//   - paused TTL → autoDeleteInterval, at least 1 (0 would make the box
//     ephemeral: deleted at its first stop).
//
// Daytona auto-deletes only boxes in state stopped; by a reading of its
// code, archived boxes are never auto-deleted [uncertain]. So when the TTL
// falls after the default 7-day archive, archiving is pushed to its
// maximum (autoArchiveInterval 0 = 30 days) for the delete to fire first.
// A TTL of 30 days or more cannot be ordered before archiving: it is sent
// as asked, and works if the other reading (archived boxes are deleted
// too) holds.
func lifecycle(body *createBody, l sdk.Lifecycle) {
	if l.IdlePauseAfter > 0 {
		n := max(api.CeilMinutes(l.IdlePauseAfter), 1)
		body.AutoStopInterval = &n
	}
	if l.PausedTTL > 0 {
		n := max(api.CeilMinutes(l.PausedTTL), 1)
		body.AutoDeleteInterval = &n
		if n >= defaultArchive && n < maxArchive {
			zero := int64(0)
			body.AutoArchiveInterval = &zero
		}
	}
}

// safeName reports whether a workspace id can go into a sandbox name
// as it is: short, letters, digits, '.', '_' and '-'.
func safeName(s string) bool {
	if s == "" || len(s) > 54 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (p provider) Create(ctx context.Context, acct sdk.Account, spec sdk.CreateSpec) (sdk.Box, error) {
	if err := api.CheckOptions(spec.Options, optSnapshot, optTarget); err != nil {
		return sdk.Box{}, err
	}
	if spec.WorkspaceID == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Invalid, "create needs a workspace id")
	}
	// A retried create finds the box the first attempt made (one
	// filtered list call; Daytona's list is eventually consistent, so the
	// unique name below is the second guard).
	found, err := p.list(ctx, acct, map[string]string{sdk.LabelWorkspace: spec.WorkspaceID}, 1)
	if err != nil {
		return sdk.Box{}, err
	}
	for _, b := range found {
		if b.Labels[sdk.LabelWorkspace] == spec.WorkspaceID && b.State != sdk.Deleted && b.State != sdk.Deleting {
			return b, nil
		}
	}
	body := createBody{
		Snapshot: api.First(spec.Options[optSnapshot], acct.Config["snapshot"]),
		Target:   api.First(spec.Options[optTarget], acct.Config["target"]),
		Labels:   api.CreateLabels(spec),
	}
	// Sandbox names are unique per organization, so naming the box after
	// the workspace makes a duplicate create a 409 (conflict) that
	// companion resolves by listing. The person's name for it is kept in
	// the companion.name label.
	if safeName(spec.WorkspaceID) {
		body.Name = "companion-" + spec.WorkspaceID
	}
	if spec.AgentKey != "" {
		// The agent-server reads its key from here (box-endpoints.md §5).
		body.Env = map[string]string{"OH_SESSION_API_KEYS_0": spec.AgentKey}
	}
	lifecycle(&body, spec.Lifecycle)
	var s sandbox
	if _, err := client(acct).Call(ctx, "POST", "/sandbox", nil, body, &s); err != nil {
		return sdk.Box{}, err
	}
	if s.ID == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Unavailable, "Daytona accepted the create but returned no sandbox id; companion will find the box by its label")
	}
	return s.box(time.Now()), nil
}

func (p provider) Suspend(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	// Read first: stop is also accepted for a memory-paused box, which
	// would throw its memory away; a box already stopping, stopped or
	// archived needs nothing.
	s, err := p.get(ctx, acct, id)
	if err != nil {
		return sdk.Box{}, err
	}
	switch state(s.State) {
	case sdk.Paused, sdk.Pausing:
		return s.box(time.Now()), nil
	case sdk.Running:
	default:
		return sdk.Box{}, sdk.Errorf(sdk.Conflict, "Daytona sandbox %s is %s; it can be stopped once it is started", id, s.State)
	}
	_, err = client(acct).Call(ctx, "POST", "/sandbox/"+api.PathID(id)+"/stop", nil, nil, nil)
	if err != nil && !api.IsKind(err, sdk.Conflict) {
		return sdk.Box{}, api.NotFound(err, "Daytona sandbox", id)
	}
	// Stop answers without a body; read the state it left (stopping or
	// stopped). After a conflict, a box that is stopping or stopped by now
	// is what was asked for.
	after, gerr := p.get(ctx, acct, id)
	if gerr != nil {
		return sdk.Box{}, gerr
	}
	if st := state(after.State); err != nil && st != sdk.Paused && st != sdk.Pausing {
		return sdk.Box{}, err
	}
	return after.box(time.Now()), nil
}

func (p provider) Resume(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	s, err := p.get(ctx, acct, id)
	if err != nil {
		return sdk.Box{}, err
	}
	switch state(s.State) {
	case sdk.Running, sdk.Resuming, sdk.Creating:
		return s.box(time.Now()), nil
	case sdk.Paused:
		if s.State == "archiving" {
			return sdk.Box{}, sdk.Errorf(sdk.Conflict, "Daytona sandbox %s is being archived; resume it once that has finished", id)
		}
	default:
		return sdk.Box{}, sdk.Errorf(sdk.Conflict, "Daytona sandbox %s is %s; it can be started once it has stopped", id, s.State)
	}
	var started sandbox
	_, err = client(acct).Call(ctx, "POST", "/sandbox/"+api.PathID(id)+"/start", nil, nil, &started)
	if err != nil {
		return sdk.Box{}, api.NotFound(err, "Daytona sandbox", id)
	}
	if started.ID == "" { // tolerate an empty answer: read the box
		return p.Get(ctx, acct, id)
	}
	return started.box(time.Now()), nil
}

func (p provider) Delete(ctx context.Context, acct sdk.Account, id string) error {
	if err := api.CheckID(id); err != nil {
		return err
	}
	_, err := client(acct).Call(ctx, "DELETE", "/sandbox/"+api.PathID(id), nil, nil, nil)
	switch {
	case err == nil, api.IsKind(err, sdk.NotFound):
		return nil
	case api.IsKind(err, sdk.Conflict):
		// A box already being destroyed answers "in progress": done.
		s, gerr := p.get(ctx, acct, id)
		if api.IsKind(gerr, sdk.NotFound) || gerr == nil && (s.State == "destroying" || s.State == "destroyed") {
			return nil
		}
	}
	return err
}

func init() { sdk.Register(provider{}) }

func main() {}
