// Command digitalocean is companion's first-party provider module for
// DigitalOcean hosted-agent sessions (the "Harness Runtime" / MARS API
// under /v2/agents/sessions that Canvas uses). It is built and packed like
// any third party's module: the SDK, a manifest, nothing privileged.
//
// Mapping (reference: agent-server.md §8, providers.md §4b):
//
//	list     GET /v2/agents/sessions, page_token / next_page_token
//	get      GET /v2/agents/sessions/{id}
//	create   POST /v2/agents/sessions {name, config_id | agent_kind, idle_timeout_seconds}
//	suspend  POST /v2/agents/sessions/{id}/pause
//	resume   POST /v2/agents/sessions/{id}/resume
//	delete   DELETE /v2/agents/sessions/{id}
//
// Sessions have no labels. The workspace id travels in the session name,
// "companion-<workspace id>": the name is accepted by both create forms
// (from a config and direct), is returned on every session, and can be
// filtered on server-side, which makes a retried create cheap to detect.
// The person's name for the workspace stays in companion.
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
	LastActivity:      true, // last_event_at
	Suspend:           true,
	SuspendKeepsFiles: true, // "the workspace is preserved"
	// Whether pause keeps memory is not documented [uncertain]; claiming
	// it would promise people state that may be lost.
	SuspendKeepsMemory: false,
	ResumeSameIdentity: true, // same session id after resume
	Delete:             true,
	// idle_timeout_seconds at create; the harness pauses idle sessions
	// (pause_reason "idle"). The spec also says last_event_at drives an
	// inactivity policy that *destroys* idle sessions [uncertain: the
	// reference marks the semantics unsure].
	NativeIdlePause: true,
	NativePausedTTL: false, // no retention setting for paused sessions found
}

// Deletion clocks (declared in manifest.json, "clocks"; agent-server.md
// §8): inactivity_destroy. The session spec says last_event_at "drives the
// inactivity policy that destroys idle sessions": starts "idle", loses the
// box, runs for every session (not a setting), and its period is not
// published (after_seconds 0), so companion cannot wait for it. The same
// spec's pause_reason "idle" says idle sessions are paused instead; until
// DigitalOcean settles it, the clock is declared, since a destroy that
// does not happen costs an export and one that does costs the work.

const (
	optConfigID  = "config_id"
	optAgentKind = "agent_kind"
	optRepoHint  = "repo_hint"

	// namePrefix marks sessions companion created; the rest of the name
	// is the workspace id.
	namePrefix = "companion-"
	// defaultAgentKind is used when neither a config nor an agent kind is
	// given: the agent Canvas runs.
	defaultAgentKind = "openhands"
)

type provider struct{}

func (provider) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "digitalocean", Version: version, Capabilities: &caps}, nil
}

// client reads both error shapes: the API gateway's classic {id, message,
// request_id} (401, 429) and the harness's {error: {code, message}}; which
// one a given error uses is not documented, so api.Detail accepts either.
var client = api.Client{Provider: "DigitalOcean"}

// session is the part of a session the module reads; unknown fields are
// ignored.
type session struct {
	SessionID   string   `json:"session_id"`
	Name        string   `json:"name"`
	Status      string   `json:"status"`
	CreatedAt   api.Time `json:"created_at"`
	LastEventAt api.Time `json:"last_event_at"`
}

// state maps SESSION_STATUS_*. PROVISIONING is both a new session and one
// waking from pause [uncertain: the interim status of a resume]; a session
// whose stream has moved on since its creation is taken to be resuming.
func (s session) state() sdk.State {
	switch strings.TrimPrefix(s.Status, "SESSION_STATUS_") {
	case "PROVISIONING":
		if !s.LastEventAt.IsZero() && s.LastEventAt.Sub(s.CreatedAt.Time) > time.Minute {
			return sdk.Resuming
		}
		return sdk.Creating
	case "READY", "DETACHED":
		return sdk.Running
	case "PAUSED":
		return sdk.Paused
	case "DESTROYING":
		return sdk.Deleting
	case "DESTROYED":
		return sdk.Deleted
	case "FAILED":
		return sdk.Failed
	}
	return sdk.Unknown // UNSPECIFIED, LOCKED, anything new
}

func (s session) box() sdk.Box {
	b := sdk.Box{
		ID:             s.SessionID,
		Name:           s.Name,
		State:          s.state(),
		CreatedAt:      s.CreatedAt.Time,
		LastActivityAt: s.LastEventAt.Time,
		// No paused-at: last_event_at is only a lower bound of the pause
		// time (it is the pause itself only if a pause is an event on the
		// stream), and overstating a paused age could bring a deletion
		// forward. companion records when it first saw the pause.
	}
	if ws, ok := strings.CutPrefix(s.Name, namePrefix); ok && ws != "" {
		b.Labels = map[string]string{sdk.LabelWorkspace: ws}
	}
	return b
}

func (p provider) List(ctx context.Context, _ sdk.Account) ([]sdk.Box, error) {
	return p.list(ctx, "", 0)
}

// list pages through GET /v2/agents/sessions. A name filters
// server-side; maxPages 0 means all pages.
func (provider) list(ctx context.Context, name string, maxPages int) ([]sdk.Box, error) {
	var boxes []sdk.Box
	token := ""
	seen := map[string]bool{}
	for page := 1; ; page++ {
		q := url.Values{"page_size": {"100"}}
		if token != "" {
			q.Set("page_token", token)
		}
		if name != "" {
			q.Set("name", name)
		}
		var res struct {
			Sessions      []session `json:"sessions"`
			NextPageToken string    `json:"next_page_token"`
		}
		if _, err := client.Call(ctx, "GET", "/v2/agents/sessions", q, nil, &res); err != nil {
			return nil, err
		}
		for _, s := range res.Sessions {
			if s.SessionID != "" {
				boxes = append(boxes, s.box())
			}
		}
		token = res.NextPageToken
		if token == "" || (maxPages > 0 && page >= maxPages) {
			return boxes, nil
		}
		if page >= api.MaxPages {
			return nil, api.TooManyPages("DigitalOcean", 100)
		}
		if seen[token] {
			return nil, sdk.Errorf(sdk.Unavailable, "DigitalOcean returned the same page token twice; try again later")
		}
		seen[token] = true
	}
}

// wrapped decodes {"session": {...}}, or a bare session should an answer
// come unwrapped.
type wrapped struct{ session }

func (w *wrapped) UnmarshalJSON(b []byte) error {
	var v struct {
		Session *session `json:"session"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.Session != nil {
		w.session = *v.Session
		return nil
	}
	return json.Unmarshal(b, &w.session)
}

func (provider) get(ctx context.Context, id string) (session, error) {
	if err := api.CheckID(id); err != nil {
		return session{}, err
	}
	var w wrapped
	if _, err := client.Call(ctx, "GET", "/v2/agents/sessions/"+api.PathID(id), nil, nil, &w); err != nil {
		return session{}, api.NotFound(err, "DigitalOcean session", id)
	}
	if w.SessionID == "" {
		w.SessionID = id
	}
	return w.session, nil
}

// Get returns destroyed sessions too (the API keeps them, status
// DESTROYED), as state deleted.
func (p provider) Get(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	s, err := p.get(ctx, id)
	if err != nil {
		return sdk.Box{}, err
	}
	return s.box(), nil
}

// createBody is what POST /v2/agents/sessions takes, in either form.
type createBody struct {
	Name               string `json:"name"`
	ConfigID           string `json:"config_id,omitempty"`
	AgentKind          string `json:"agent_kind,omitempty"`
	RepoHint           string `json:"repo_hint,omitempty"`
	IdleTimeoutSeconds int64  `json:"idle_timeout_seconds,omitempty"`
	// KeepWarm false is sent only for direct creates: Canvas notes that
	// the openhands adapter defaults to keep_warm, which makes the
	// harness refuse every pause. Whether the create body takes this
	// field is not documented [uncertain]; DigitalOcean's gateway ignores
	// unknown fields. With a config, its manifest decides.
	KeepWarm *bool `json:"keep_warm,omitempty"`
}

func (p provider) Create(ctx context.Context, acct sdk.Account, spec sdk.CreateSpec) (sdk.Box, error) {
	if err := api.CheckOptions(spec.Options, optConfigID, optAgentKind, optRepoHint); err != nil {
		return sdk.Box{}, err
	}
	if spec.WorkspaceID == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Invalid, "create needs a workspace id")
	}
	name := namePrefix + spec.WorkspaceID
	// A retried create finds the session the first attempt made.
	found, err := p.list(ctx, name, 1)
	if err != nil {
		return sdk.Box{}, err
	}
	for _, b := range found {
		if b.Labels[sdk.LabelWorkspace] == spec.WorkspaceID && b.State != sdk.Deleted && b.State != sdk.Deleting {
			return b, nil
		}
	}
	body := createBody{
		Name: name,
		// Both forms carry the idle setting; 0 leaves the deployment's
		// default (HARNESS_IDLE_PAUSE_TIMEOUT).
		IdleTimeoutSeconds: api.CeilSeconds(spec.Lifecycle.IdlePauseAfter),
	}
	agentKind := spec.Options[optAgentKind]
	switch {
	case spec.Options[optConfigID] != "" || agentKind == "" && acct.Config["config_id"] != "":
		body.ConfigID = api.First(spec.Options[optConfigID], acct.Config["config_id"])
	default:
		no := false
		body.AgentKind = api.First(agentKind, acct.Config["agent_kind"], defaultAgentKind)
		body.RepoHint = spec.Options[optRepoHint]
		body.KeepWarm = &no
	}
	if body.ConfigID != "" && spec.Options[optRepoHint] != "" {
		return sdk.Box{}, sdk.Errorf(sdk.Invalid, "option repo_hint goes with agent_kind, not with config_id (the config's manifest sets the repository)")
	}
	var w wrapped
	if _, err := client.Call(ctx, "POST", "/v2/agents/sessions", nil, body, &w); err != nil {
		return sdk.Box{}, err
	}
	if w.SessionID == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Unavailable, "DigitalOcean accepted the create but returned no session id; companion will find the session by its name")
	}
	if w.Name == "" {
		w.Name = name
	}
	return w.box(), nil
}

func (p provider) Suspend(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	if err := api.CheckID(id); err != nil {
		return sdk.Box{}, err
	}
	_, err := client.Call(ctx, "POST", "/v2/agents/sessions/"+api.PathID(id)+"/pause", nil, nil, nil)
	if err != nil && !api.IsKind(err, sdk.Conflict) {
		return sdk.Box{}, api.NotFound(err, "DigitalOcean session", id)
	}
	// Pause answers 204; 409 means the session is not READY or DETACHED
	// (already paused is fine) or is keep_warm.
	s, gerr := p.get(ctx, id)
	if gerr != nil {
		return sdk.Box{}, gerr
	}
	if err != nil && s.state() != sdk.Paused {
		return sdk.Box{}, err
	}
	return s.box(), nil
}

func (p provider) Resume(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	if err := api.CheckID(id); err != nil {
		return sdk.Box{}, err
	}
	_, err := client.Call(ctx, "POST", "/v2/agents/sessions/"+api.PathID(id)+"/resume", nil, nil, nil)
	if err != nil && !api.IsKind(err, sdk.Conflict) {
		return sdk.Box{}, api.NotFound(err, "DigitalOcean session", id)
	}
	// Resume answers 204, or 409 when the session is not PAUSED (a
	// running one is what was asked for).
	s, gerr := p.get(ctx, id)
	if gerr != nil {
		return sdk.Box{}, gerr
	}
	b := s.box()
	if err != nil && b.State != sdk.Running && b.State != sdk.Resuming {
		return sdk.Box{}, err
	}
	if err == nil && b.State == sdk.Creating {
		b.State = sdk.Resuming // provisioning again after this resume
	}
	return b, nil
}

func (provider) Delete(ctx context.Context, _ sdk.Account, id string) error {
	if err := api.CheckID(id); err != nil {
		return err
	}
	_, err := client.Call(ctx, "DELETE", "/v2/agents/sessions/"+api.PathID(id), nil, nil, nil)
	if api.IsKind(err, sdk.NotFound) {
		return nil
	}
	return err
}

func init() { sdk.Register(provider{}) }

func main() {}
