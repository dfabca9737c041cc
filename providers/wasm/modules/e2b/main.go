// Command e2b is companion's first-party provider module for E2B sandboxes
// (https://api.e2b.app, or a self-hosted E2B through the account's
// api_url). It is built and packed like any third party's module: the
// SDK, a manifest, nothing privileged.
//
// Mapping (reference: providers.md §2):
//
//	list     GET /v2/sandboxes?state=running,paused, X-Next-Token pagination
//	get      GET /sandboxes/{id}
//	create   POST /sandboxes with metadata, timeout and autoPause
//	suspend  POST /sandboxes/{id}/pause (files and memory kept)
//	resume   POST /sandboxes/{id}/connect
//	delete   DELETE /sandboxes/{id}
//
// E2B's timeout is a wall-clock TTL counted from create or resume, not an
// idle timer, and it kills the sandbox unless autoPause is set. The API
// default is 15 seconds. So every create sends autoPause and a timeout:
// the workspace's idle-pause setting, or 15 minutes. The timeout is kept
// in the sandbox's metadata so that a resume grants the same again.
package main

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/canvasapp/companion/providers/wasm/modules/internal/api"
	"github.com/canvasapp/companion/providers/wasm/sdk"
)

const version = "1.0.0"

var caps = sdk.Capabilities{
	List:               true,
	LastActivity:       false, // E2B reports startedAt and endAt, no activity
	Suspend:            true,
	SuspendKeepsFiles:  true,
	SuspendKeepsMemory: true, // pause snapshots memory by default
	ResumeSameIdentity: true,
	Delete:             true,
	// E2B pauses boxes on its own (timeout + autoPause), but on a TTL from
	// start or resume, not after idleness: an approximation of idle pause
	// that errs towards pausing early.
	NativeIdlePause: true,
	// Paused sandboxes have no documented expiry.
	NativePausedTTL: false,
}

// Deletion clocks: none (manifest.json declares no "clocks").
//
//   - The timeout would kill a sandbox, but every create sends autoPause,
//     so for companion's boxes it pauses instead (see create).
//   - The reference documents no deletion of paused sandboxes today
//     (providers.md §0: "none documented"). E2B's beta docs once said
//     paused sandboxes may be deleted 30 days after creation
//     (e2b-dev/docs@d940a4e persistence.mdx); no current E2B statement
//     says so [uncertain]. Should E2B publish one, declare it here; note
//     that it would count from creation, which a clock cannot start from
//     (starts is "paused" or "idle"): declare it with after_seconds 0.

const (
	optTemplate = "template"

	// defaultTemplate is E2B's base template, what its SDKs use when none
	// is named.
	defaultTemplate = "base"
	// defaultTimeout is sent when the workspace has no idle setting: the
	// API's own default (15 s) would pause a box before anyone used it.
	defaultTimeout = 15 * 60
	// metaTimeout records the timeout (seconds) on the sandbox for resume.
	metaTimeout = "companion.timeout"
)

type provider struct{}

func (provider) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "e2b", Version: version, Capabilities: &caps}, nil
}

var client = api.Client{Provider: "E2B"}

// sandbox is E2B's ListedSandbox / SandboxDetail, the fields the module
// reads; everything else is ignored.
type sandbox struct {
	SandboxID  string            `json:"sandboxID"`
	TemplateID string            `json:"templateID"`
	Alias      string            `json:"alias"`
	State      string            `json:"state"`
	StartedAt  api.Time          `json:"startedAt"`
	EndAt      api.Time          `json:"endAt"`
	DiskSizeMB int64             `json:"diskSizeMB"`
	Metadata   map[string]string `json:"metadata"`
}

// state maps E2B's sandbox state. The spec names only running and paused;
// the others are tolerated should they appear.
func state(s string) sdk.State {
	switch s {
	case "running":
		return sdk.Running
	case "paused":
		return sdk.Paused
	case "pausing":
		return sdk.Pausing
	case "resuming", "starting":
		return sdk.Resuming
	case "killing":
		return sdk.Deleting
	}
	return sdk.Unknown
}

func (s sandbox) box(now time.Time) sdk.Box {
	b := sdk.Box{
		ID:     s.SandboxID,
		Name:   api.First(s.Metadata[api.LabelName], s.Alias),
		State:  state(s.State),
		Labels: api.Labels(s.Metadata),
		// startedAt moves on every resume, so it is not a creation time;
		// CreatedAt stays unknown rather than wrong.
	}
	// For a paused sandbox the list handler reports endAt as the time of
	// the pause snapshot [uncertain: read from E2B's handler code]. Under
	// the other reading (endAt is the expiry the running box had) it can
	// only be later than the pause, which understates the paused age, so
	// it is used when it lies in the past and after the start.
	if b.State == sdk.Paused && !s.EndAt.IsZero() && !s.EndAt.After(now) && !s.EndAt.Before(s.StartedAt.Time) {
		b.PausedAt = s.EndAt.Time
	}
	// diskSizeMB is the size of the sandbox's disk, not what is used
	// [uncertain: MB read as MiB].
	if s.DiskSizeMB > 0 {
		b.Size = &sdk.Size{Bytes: s.DiskSizeMB << 20, Source: sdk.SizeAllocated, At: now}
	}
	return b
}

func (p provider) List(ctx context.Context, acct sdk.Account) ([]sdk.Box, error) {
	return p.list(ctx, nil, 0)
}

// list pages through GET /v2/sandboxes, running and paused (both are
// named: some versions list only running ones when state is absent). With
// meta it filters by metadata server-side; maxPages 0 means all pages.
func (provider) list(ctx context.Context, meta map[string]string, maxPages int) ([]sdk.Box, error) {
	var boxes []sdk.Box
	token := ""
	seen := map[string]bool{}
	for page := 1; ; page++ {
		q := url.Values{"state": {"running,paused"}, "limit": {"100"}}
		if token != "" {
			q.Set("nextToken", token)
		}
		if len(meta) > 0 {
			// The metadata parameter is itself a URL-encoded query string.
			m := url.Values{}
			for k, v := range meta {
				m.Set(k, v)
			}
			q.Set("metadata", m.Encode())
		}
		var items []sandbox
		resp, err := client.Call(ctx, "GET", "/v2/sandboxes", q, nil, &items)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		for _, s := range items {
			if s.SandboxID != "" {
				boxes = append(boxes, s.box(now))
			}
		}
		token = resp.Header("X-Next-Token")
		if token == "" || len(items) == 0 || (maxPages > 0 && page >= maxPages) {
			return boxes, nil
		}
		if page >= api.MaxPages {
			return nil, api.TooManyPages("E2B", 100)
		}
		if seen[token] {
			return nil, sdk.Errorf(sdk.Unavailable, "E2B returned the same page token twice; try again later")
		}
		seen[token] = true
	}
}

func (provider) get(ctx context.Context, id string) (sandbox, error) {
	if err := api.CheckID(id); err != nil {
		return sandbox{}, err
	}
	var s sandbox
	if _, err := client.Call(ctx, "GET", "/sandboxes/"+api.PathID(id), nil, nil, &s); err != nil {
		return sandbox{}, api.NotFound(err, "E2B sandbox", id)
	}
	if s.SandboxID == "" {
		s.SandboxID = id
	}
	return s, nil
}

func (p provider) Get(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	s, err := p.get(ctx, id)
	if err != nil {
		return sdk.Box{}, err
	}
	return s.box(time.Now()), nil
}

// newSandbox is E2B's NewSandbox, the fields the module sets.
type newSandbox struct {
	TemplateID string            `json:"templateID"`
	Timeout    int64             `json:"timeout"`
	AutoPause  bool              `json:"autoPause"`
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars,omitempty"`
	// Network makes the sandbox's ports private: the proxy then wants the
	// traffic token, which only create and connect answers carry.
	Network *network `json:"network,omitempty"`
}

type network struct {
	AllowPublicTraffic bool `json:"allowPublicTraffic"`
}

func (p provider) Create(ctx context.Context, acct sdk.Account, spec sdk.CreateSpec) (sdk.Box, error) {
	if err := api.CheckOptions(spec.Options, optTemplate); err != nil {
		return sdk.Box{}, err
	}
	if spec.WorkspaceID == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Invalid, "create needs a workspace id")
	}
	// A retried create finds the box the first attempt made: one list
	// call filtered by the workspace's metadata.
	found, err := p.list(ctx, map[string]string{sdk.LabelWorkspace: spec.WorkspaceID}, 1)
	if err != nil {
		return sdk.Box{}, err
	}
	for _, b := range found {
		if b.Labels[sdk.LabelWorkspace] == spec.WorkspaceID {
			return b, nil
		}
	}
	timeout := api.CeilSeconds(spec.Lifecycle.IdlePauseAfter)
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	meta := api.CreateLabels(spec)
	meta[metaTimeout] = strconv.FormatInt(timeout, 10)
	body := newSandbox{
		TemplateID: api.First(spec.Options[optTemplate], acct.Config["template"], defaultTemplate),
		Timeout:    timeout,
		AutoPause:  true, // without it the timeout kills the box
		Metadata:   meta,
		Network:    &network{AllowPublicTraffic: false},
	}
	if spec.AgentKey != "" {
		body.EnvVars = map[string]string{"OH_SESSION_API_KEYS_0": spec.AgentKey}
	}
	var created sandbox
	if _, err := client.Call(ctx, "POST", "/sandboxes", nil, body, &created); err != nil {
		return sdk.Box{}, err
	}
	if created.SandboxID == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Unavailable, "E2B accepted the create but returned no sandbox id; companion will find the box by its metadata")
	}
	// Create answers with the short Sandbox shape (no state, no times);
	// read the full record, or describe what was just made if that fails.
	if s, err := p.get(ctx, created.SandboxID); err == nil {
		return s.box(time.Now()), nil
	}
	created.State, created.Metadata = "running", meta
	return created.box(time.Now()), nil
}

func (p provider) Suspend(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	if err := api.CheckID(id); err != nil {
		return sdk.Box{}, err
	}
	_, err := client.Call(ctx, "POST", "/sandboxes/"+api.PathID(id)+"/pause", nil, nil, nil)
	if err != nil && !api.IsKind(err, sdk.Conflict) {
		return sdk.Box{}, api.NotFound(err, "E2B sandbox", id)
	}
	// Pause answers 204; 409 means already paused, or in a state that
	// cannot be paused: the box's state tells which.
	s, gerr := p.get(ctx, id)
	if gerr != nil {
		return sdk.Box{}, gerr
	}
	if st := state(s.State); err != nil && st != sdk.Paused && st != sdk.Pausing {
		return sdk.Box{}, err
	}
	return s.box(time.Now()), nil
}

func (p provider) Resume(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	s, err := p.get(ctx, id)
	if err != nil {
		return sdk.Box{}, err
	}
	if st := state(s.State); st == sdk.Running || st == sdk.Resuming {
		// Connecting would only extend its TTL; nothing to do.
		return s.box(time.Now()), nil
	}
	timeout, err := strconv.ParseInt(s.Metadata[metaTimeout], 10, 64)
	if err != nil || timeout <= 0 {
		timeout = defaultTimeout
	}
	body := struct {
		Timeout int64 `json:"timeout"`
	}{timeout}
	// connect answers 201 after resuming a paused box, 200 if it was
	// running after all.
	if _, err := client.Call(ctx, "POST", "/sandboxes/"+api.PathID(id)+"/connect", nil, body, nil); err != nil {
		return sdk.Box{}, api.NotFound(err, "E2B sandbox", id)
	}
	return p.Get(ctx, sdk.Account{}, id)
}

func (provider) Delete(ctx context.Context, _ sdk.Account, id string) error {
	if err := api.CheckID(id); err != nil {
		return err
	}
	_, err := client.Call(ctx, "DELETE", "/sandboxes/"+api.PathID(id), nil, nil, nil)
	if api.IsKind(err, sdk.NotFound) {
		return nil
	}
	return err
}

func init() { sdk.Register(provider{}) }

func main() {}
