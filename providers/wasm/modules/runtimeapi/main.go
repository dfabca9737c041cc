// Command runtimeapi is companion's first-party provider module for the
// OpenHands runtime-api, the private service behind OpenHands Cloud's and
// the evals' remote runtimes (https://runtime.eval.all-hands.dev, or
// another deployment through the account's api_url). It is built and
// packed like any third party's module.
//
// Mapping (reference: providers-wave3.md §1; every call sends X-API-Key):
//
//	list     GET /list, filtered to this account's session ids
//	get      GET /sessions/{session_id}
//	create   POST /start {image, command, working_dir, environment, session_id}
//	suspend  POST /pause  {runtime_id} (disk kept, memory not)
//	resume   POST /resume {runtime_id} (a new session_api_key)
//	delete   POST /stop   {runtime_id} (404: already gone)
//
// The box id is the session_id companion chose, not the runtime_id: it is
// companion's own (so a retried create is one GET), it names the account
// and the workspace (so /list, which spans every user of the key, can be
// filtered to the runtimes this account made), and it stays the same
// across pause and resume. The runtime_id is read from
// /sessions/{session_id} before each pause, resume and stop.
package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/canvasapp/companion/providers/wasm/modules/internal/api"
	"github.com/canvasapp/companion/providers/wasm/sdk"
)

const version = "1.0.0"

var caps = sdk.Capabilities{
	List: true,
	// The runtime-api reports no activity time; idleness is measured on
	// the agent-server (/server_info idle_time), which companion reads
	// itself where it needs it.
	LastActivity:       false,
	Suspend:            true,
	SuspendKeepsFiles:  true,  // the pod's volume survives a pause
	SuspendKeepsMemory: false, // the pod is scaled down: processes end
	// The session id (the box id) survives a pause; the session key does
	// not (resume makes a new one), which Box.Key reports.
	ResumeSameIdentity: true,
	Delete:             true,
	// The runtime-api's own cleanup job pauses runtimes whose agent-server
	// reports a growing idle_time (~20 min, OpenHands Cloud's default;
	// §1.6). Its period is not settable from /start.
	NativeIdlePause: true,
	NativePausedTTL: false,
}

// Options a create may carry.
const (
	optImage          = "image"
	optResourceFactor = "resource_factor"
)

// Defaults when the account leaves them empty (§1.8: the SDK starts the
// agent-server on port 60000).
const (
	defaultCommand    = "openhands-agent-server --port 60000"
	defaultWorkingDir = "/workspace"
)

type provider struct{}

func (provider) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "runtimeapi", Version: version, Capabilities: &caps}, nil
}

func client() api.Client { return api.Client{Provider: "OpenHands runtime-api"} }

// sessionPrefix is what every session id of this account starts with:
// "companion-{account id}-". The workspace id follows it.
func sessionPrefix(acct sdk.Account) string { return "companion-" + acct.ID + "-" }

// sessionID is the session id of workspace ws's runtime.
func sessionID(acct sdk.Account, ws string) string { return sessionPrefix(acct) + ws }

// ours returns the workspace id a session id of this account names.
func ours(acct sdk.Account, sid string) (string, bool) {
	ws, ok := strings.CutPrefix(sid, sessionPrefix(acct))
	return ws, ok && ws != "" && acct.ID != ""
}

// runtime is the part of the runtime-api's runtime object the module
// reads (start, /sessions/{id} and /list items); the rest is ignored.
type runtime struct {
	RuntimeID     string `json:"runtime_id"`
	ID            string `json:"id"` // the SDK accepts it in place of runtime_id
	SessionID     string `json:"session_id"`
	Status        string `json:"status"`
	PodStatus     string `json:"pod_status"`
	URL           string `json:"url"`
	SessionAPIKey string `json:"session_api_key"`
}

func (r runtime) runtimeID() string { return api.First(r.RuntimeID, r.ID) }

// state maps status and pod_status (§1.3) onto companion's states.
// status is the source of truth in newer clients, but a "running" runtime
// whose pod is still starting (pending, running-not-ready, not found) is
// reported as creating, and a pod in a terminal failure as error.
func (r runtime) state() sdk.State {
	switch strings.ToLower(r.Status) {
	case "running":
		switch strings.ToLower(r.PodStatus) {
		case "pending", "running", "not found":
			return sdk.Creating
		case "failed", "unknown", "crashloopbackoff":
			return sdk.Failed
		}
		return sdk.Running
	case "starting":
		return sdk.Creating
	case "paused":
		return sdk.Paused
	case "stopped":
		return sdk.Deleted
	case "error":
		return sdk.Failed
	}
	return sdk.Unknown
}

// box reports r as box sid (the session id, which /sessions/{id} does
// not repeat).
func (r runtime) box(acct sdk.Account, sid string) sdk.Box {
	b := sdk.Box{ID: sid, Name: sid, URL: r.URL, Key: r.SessionAPIKey, State: r.state()}
	if ws, ok := ours(acct, sid); ok {
		b.Labels = map[string]string{sdk.LabelWorkspace: ws}
	}
	return b
}

func (provider) List(ctx context.Context, acct sdk.Account) ([]sdk.Box, error) {
	var res struct {
		Runtimes []runtime `json:"runtimes"`
		Total    int       `json:"total"`
	}
	if _, err := client().Call(ctx, "GET", "/list", nil, nil, &res); err != nil {
		return nil, err
	}
	var boxes []sdk.Box
	seen := map[string]bool{}
	for _, r := range res.Runtimes {
		// /list spans every user of the key: only this account's
		// session ids are companion's to adopt.
		if _, ok := ours(acct, r.SessionID); !ok || seen[r.SessionID] {
			continue
		}
		b := r.box(acct, r.SessionID)
		if b.State == sdk.Deleted {
			continue
		}
		seen[r.SessionID] = true
		boxes = append(boxes, b)
	}
	return boxes, nil
}

// get reads runtime sid. A stopped runtime is gone: not found.
func (provider) get(ctx context.Context, acct sdk.Account, sid string) (runtime, error) {
	if err := api.CheckID(sid); err != nil {
		return runtime{}, err
	}
	var r runtime
	if _, err := client().Call(ctx, "GET", "/sessions/"+api.PathID(sid), nil, nil, &r); err != nil {
		return runtime{}, api.NotFound(err, "OpenHands runtime", sid)
	}
	if r.state() == sdk.Deleted {
		return runtime{}, sdk.Errorf(sdk.NotFound, "OpenHands runtime %s is stopped (gone)", sid)
	}
	if r.runtimeID() == "" {
		return runtime{}, sdk.Errorf(sdk.Unavailable, "the OpenHands runtime-api answered for session %s without a runtime_id", sid)
	}
	return r, nil
}

func (p provider) Get(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	r, err := p.get(ctx, acct, id)
	if err != nil {
		return sdk.Box{}, err
	}
	return r.box(acct, id), nil
}

// startBody is POST /start, the fields the module sets.
type startBody struct {
	Image          string            `json:"image"`
	Command        string            `json:"command"`
	WorkingDir     string            `json:"working_dir"`
	Environment    map[string]string `json:"environment"`
	SessionID      string            `json:"session_id"`
	ResourceFactor int               `json:"resource_factor,omitempty"`
}

func (p provider) Create(ctx context.Context, acct sdk.Account, spec sdk.CreateSpec) (sdk.Box, error) {
	if err := api.CheckOptions(spec.Options, optImage, optResourceFactor); err != nil {
		return sdk.Box{}, err
	}
	if spec.WorkspaceID == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Invalid, "create needs a workspace id")
	}
	if acct.ID == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Invalid, "create needs an account id (it goes into the session id)")
	}
	body := startBody{
		Image:      api.First(spec.Options[optImage], acct.Config["image"]),
		Command:    api.First(acct.Config["command"], defaultCommand),
		WorkingDir: api.First(acct.Config["working_dir"], defaultWorkingDir),
		SessionID:  sessionID(acct, spec.WorkspaceID),
		// Labels go into the environment too (the runtime-api keeps no
		// labels); the session id is what companion reads back.
		Environment: map[string]string{"COMPANION_WORKSPACE": spec.WorkspaceID},
	}
	if body.Image == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Invalid, "no image: set the account's image setting or give the image option")
	}
	if v := spec.Options[optResourceFactor]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || (n != 1 && n != 2 && n != 4 && n != 8) {
			return sdk.Box{}, sdk.Errorf(sdk.Invalid, "option resource_factor %q: want 1, 2, 4 or 8", v)
		}
		body.ResourceFactor = n
	}
	if spec.AgentKey != "" {
		// The agent-server reads accepted keys from here (§1.1); whether
		// the runtime-api keeps it or injects its own is uncertain, so
		// the box reports the key the runtime-api answers with.
		body.Environment["OH_SESSION_API_KEYS_0"] = spec.AgentKey
	}
	// A retried create finds the runtime the first attempt started: the
	// session id is companion's own, so this is one GET.
	if r, err := p.get(ctx, acct, body.SessionID); err == nil {
		return r.box(acct, body.SessionID), nil
	} else if !api.IsKind(err, sdk.NotFound) {
		return sdk.Box{}, err
	}
	var r runtime
	if _, err := client().Call(ctx, "POST", "/start", nil, body, &r); err != nil {
		return sdk.Box{}, err
	}
	if r.runtimeID() == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Unavailable, "the OpenHands runtime-api accepted the start but returned no runtime_id; companion will find the runtime by its session id")
	}
	b := r.box(acct, body.SessionID)
	if b.State == sdk.Unknown || b.State == sdk.Deleted {
		// /start answers before every client maps status: a fresh
		// runtime is starting.
		b.State = sdk.Creating
	}
	return b, nil
}

// action posts {runtime_id} to path (/pause, /resume, /stop) and decodes
// the answer into out when given.
func action(ctx context.Context, path, runtimeID string, out any) error {
	_, err := client().Call(ctx, "POST", path, nil, map[string]string{"runtime_id": runtimeID}, out)
	return err
}

func (p provider) Suspend(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	r, err := p.get(ctx, acct, id)
	if err != nil {
		return sdk.Box{}, err
	}
	switch r.state() {
	case sdk.Paused:
		return r.box(acct, id), nil
	case sdk.Running:
	default:
		return sdk.Box{}, sdk.Errorf(sdk.Conflict, "OpenHands runtime %s is %s; it can be paused once it is running", id, r.Status)
	}
	if err := action(ctx, "/pause", r.runtimeID(), nil); err != nil {
		return sdk.Box{}, api.NotFound(err, "OpenHands runtime", id)
	}
	after, err := p.get(ctx, acct, id)
	if err != nil {
		return sdk.Box{}, err
	}
	b := after.box(acct, id)
	b.PausedAt = time.Now() // the runtime-api reports no pause time; this is an upper bound of it
	return b, nil
}

func (p provider) Resume(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	r, err := p.get(ctx, acct, id)
	if err != nil {
		return sdk.Box{}, err
	}
	switch r.state() {
	case sdk.Running, sdk.Creating:
		return r.box(acct, id), nil
	case sdk.Paused:
	default:
		return sdk.Box{}, sdk.Errorf(sdk.Conflict, "OpenHands runtime %s is %s; only a paused runtime can be resumed", id, r.Status)
	}
	// Resume makes a new session_api_key and invalidates the old one
	// (§1.5); it is read from the answer, then the runtime is read again
	// for its status and URL.
	var resumed runtime
	if err := action(ctx, "/resume", r.runtimeID(), &resumed); err != nil {
		return sdk.Box{}, api.NotFound(err, "OpenHands runtime", id)
	}
	after, err := p.get(ctx, acct, id)
	if err != nil {
		return sdk.Box{}, err
	}
	b := after.box(acct, id)
	if b.Key == "" {
		b.Key = resumed.SessionAPIKey
	}
	if b.State == sdk.Paused || b.State == sdk.Creating {
		b.State = sdk.Resuming
	}
	return b, nil
}

func (p provider) Delete(ctx context.Context, acct sdk.Account, id string) error {
	r, err := p.get(ctx, acct, id)
	if api.IsKind(err, sdk.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	err = action(ctx, "/stop", r.runtimeID(), nil)
	if err == nil || api.IsKind(err, sdk.NotFound) {
		return nil
	}
	return err
}

func init() { sdk.Register(provider{}) }

func main() {}
