// Command cloudflare is companion's first-party provider module for
// Cloudflare Sandbox, reached through the bridge Worker the user deploys
// (@cloudflare/sandbox/bridge; reference: providers-wave3.md §2). It is
// built and packed like any third party's module.
//
// Mapping (every call sends Authorization: Bearer <SANDBOX_API_KEY>):
//
//	list      none: the bridge has no list route, companion's records are the registry
//	get       no request (see below)
//	create    POST /v1/sandbox/{id}/exec: start the agent-server (the first call starts the container)
//	endpoint  POST /v1/sandbox/{id}/tunnel/8000 → the tunnel's url
//	delete    DELETE /v1/sandbox/{id} (204, also when no container runs)
//	suspend / resume: refused; a sleeping sandbox loses its files, so there is no pause that keeps them
//
// Every /v1/sandbox/{id}/* call starts a container when the id has none
// (§2.4), /running included: there is no side-effect-free status read. So
// get makes no request at all (companion calls it on a timer for
// providers without a list, and a timer must never wake a box): it checks
// that the id is one this account makes and reports it running, which is
// what the bridge would do with it. What the sandbox's sleep loses is the
// manifest's sleep_wipe clock.
//
// The sandbox id is companion's own, derived from the account and the
// workspace (the bridge accepts any ^[a-z2-7]{1,128}$ id, and POST
// /v1/sandbox only mints a random one and stores nothing): a retried
// create after a crash reaches the same sandbox, and get can read the
// workspace back from the id.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/canvasapp/companion/providers/wasm/modules/internal/api"
	"github.com/canvasapp/companion/providers/wasm/sdk"
)

const version = "1.0.0"

var caps = sdk.Capabilities{
	// No list route, and companion keeps no box it did not make: nothing
	// to adopt.
	List:         false,
	LastActivity: false,
	// No pause: the bridge has none, and the sandbox's own sleep (after
	// 10 min without requests) drops its files and processes.
	Suspend:            false,
	SuspendKeepsFiles:  false,
	SuspendKeepsMemory: false,
	// Nothing resumes (the manifest allows it only with suspend); the id
	// itself never changes.
	ResumeSameIdentity: false,
	Delete:             true,
	// The sleep is not a pause: it loses the files, which the manifest
	// declares as the sleep_wipe clock instead.
	NativeIdlePause: false,
	NativePausedTTL: false,
}

// Defaults when the account leaves them empty.
const defaultAgentCommand = "openhands-agent-server --host 0.0.0.0 --port 8000"

// agentPort is the agent-server's port inside the container.
const agentPort = "8000"

type provider struct{}

func (provider) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "cloudflare", Version: version, Capabilities: &caps}, nil
}

func client() api.Client {
	return api.Client{Provider: "the Cloudflare Sandbox bridge", Adjust: adjust}
}

// adjust words the bridge's own codes ({error, code}, §2.2).
func adjust(resp *sdk.Response, e *sdk.Error) {
	switch api.Code(resp.Body) {
	case "capacity_exceeded":
		e.Kind = sdk.Unavailable
		e.Message = "the Cloudflare Sandbox bridge has no container capacity left (capacity_exceeded: raise WARM_POOL_MAX_INSTANCES or the account's container limits); companion will retry"
	case "payload_too_large":
		e.Kind = sdk.Invalid
		e.Message = "the Cloudflare Sandbox bridge refused a body over its 32 MiB limit (payload_too_large)"
	}
}

// Box ids: an 8-character tag of the account, then the workspace id in
// lowercase base32, all within the bridge's ^[a-z2-7]{1,128}$.
var (
	b32     = base32.StdEncoding.WithPadding(base32.NoPadding)
	idRE    = regexp.MustCompile(`^[a-z2-7]{1,128}$`)
	tagSize = 8
)

func accountTag(acct sdk.Account) string {
	sum := sha256.Sum256([]byte("companion/cloudflare/" + acct.ID))
	return strings.ToLower(b32.EncodeToString(sum[:]))[:tagSize]
}

// boxID is workspace ws's sandbox id for acct.
func boxID(acct sdk.Account, ws string) (string, error) {
	id := accountTag(acct) + strings.ToLower(b32.EncodeToString([]byte(ws)))
	if len(id) > 128 {
		return "", sdk.Errorf(sdk.Invalid, "workspace id %q is too long for a Cloudflare sandbox id (at most 128 characters of a-z and 2-7 once encoded)", ws)
	}
	return id, nil
}

// workspaceOf returns the workspace a sandbox id of acct names; ok is
// false for an id this account does not make.
func workspaceOf(acct sdk.Account, id string) (string, bool) {
	if acct.ID == "" || !idRE.MatchString(id) || len(id) <= tagSize || id[:tagSize] != accountTag(acct) {
		return "", false
	}
	raw, err := b32.DecodeString(strings.ToUpper(id[tagSize:]))
	if err != nil || len(raw) == 0 || !utf8.Valid(raw) {
		return "", false
	}
	ws := string(raw)
	if again, err := boxID(acct, ws); err != nil || again != id {
		return "", false
	}
	return ws, true
}

// ours checks id before any request about it.
func ours(acct sdk.Account, id string) (string, error) {
	if err := api.CheckID(id); err != nil {
		return "", err
	}
	ws, ok := workspaceOf(acct, id)
	if !ok {
		return "", sdk.Errorf(sdk.NotFound, "Cloudflare sandbox %s is not one companion made for this account", id)
	}
	return ws, nil
}

// bridgeURL refuses to run without the account's Worker URL: the
// manifest's base URL is only a placeholder.
func bridgeURL(acct sdk.Account) error {
	if strings.TrimSpace(acct.Config["api_url"]) == "" {
		return sdk.Errorf(sdk.Invalid, "set the account's api_url to the URL of your bridge Worker (e.g. https://sandbox-bridge.my-team.workers.dev)")
	}
	return nil
}

func box(id, ws string) sdk.Box {
	return sdk.Box{ID: id, Name: id, State: sdk.Running, Labels: map[string]string{sdk.LabelWorkspace: ws}}
}

func (provider) List(context.Context, sdk.Account) ([]sdk.Box, error) {
	return nil, sdk.Errorf(sdk.Invalid, "the Cloudflare Sandbox bridge has no list route; companion's own records are the registry (capability list is false)")
}

// Get makes no request: see the package comment.
func (provider) Get(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	ws, err := ours(acct, id)
	if err != nil {
		return sdk.Box{}, err
	}
	return box(id, ws), nil
}

func (provider) Create(ctx context.Context, acct sdk.Account, spec sdk.CreateSpec) (sdk.Box, error) {
	for k := range spec.Options {
		return sdk.Box{}, sdk.Errorf(sdk.Invalid, "unknown option %q: Cloudflare sandboxes take no create options (the container image is your bridge Worker's)", k)
	}
	if spec.WorkspaceID == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Invalid, "create needs a workspace id")
	}
	if acct.ID == "" {
		return sdk.Box{}, sdk.Errorf(sdk.Invalid, "create needs an account id (it goes into the sandbox id)")
	}
	if err := bridgeURL(acct); err != nil {
		return sdk.Box{}, err
	}
	id, err := boxID(acct, spec.WorkspaceID)
	if err != nil {
		return sdk.Box{}, err
	}
	script, err := startScript(api.First(acct.Config["agent_command"], defaultAgentCommand), spec.AgentKey)
	if err != nil {
		return sdk.Box{}, err
	}
	// The first call starts the container; the script starts the
	// agent-server unless it runs already, so a retried create is safe.
	res, err := execute(ctx, id, []string{"sh", "-c", script})
	if err != nil {
		return sdk.Box{}, err
	}
	if res.code != 0 {
		return sdk.Box{}, sdk.Errorf(sdk.Unavailable, "starting the agent-server in Cloudflare sandbox %s exited with %d: %s (check the account's agent_command and your Worker's container image)", id, res.code, res.tail())
	}
	return box(id, spec.WorkspaceID), nil
}

func (provider) Suspend(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	return sdk.Box{}, sdk.Errorf(sdk.Invalid, "Cloudflare sandboxes cannot be paused: the bridge has no pause, and a sleeping sandbox loses its files. Export the workspace, then delete it; restore the export to continue")
}

func (provider) Resume(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	return sdk.Box{}, sdk.Errorf(sdk.Invalid, "Cloudflare sandboxes cannot be paused, so there is nothing to resume: restore an export into a new workspace instead")
}

// Delete destroys the sandbox's container. An id this account does not
// make is nothing of companion's: it succeeds without a request.
func (provider) Delete(ctx context.Context, acct sdk.Account, id string) error {
	if _, err := ours(acct, id); err != nil {
		if api.IsKind(err, sdk.NotFound) {
			return nil
		}
		return err
	}
	if err := bridgeURL(acct); err != nil {
		return err
	}
	_, err := client().Call(ctx, "DELETE", "/v1/sandbox/"+api.PathID(id), nil, nil, nil)
	if err == nil || api.IsKind(err, sdk.NotFound) {
		return nil
	}
	return err
}

func init() { sdk.Register(provider{}) }

func main() {}
