// Package sdk is the Go guest SDK for companion provider modules (ABI v1,
// see providers/wasm/ABI.md). A module implements Provider, registers it
// from init, and is built as a WebAssembly reactor:
//
//	package main
//
//	import "github.com/canvasapp/companion/providers/wasm/sdk"
//
//	type provider struct{ sdk.Unimplemented }
//
//	func (provider) Describe(ctx context.Context) (sdk.Info, error) { ... }
//	func (provider) List(ctx context.Context, acct sdk.Account) ([]sdk.Box, error) { ... }
//
//	func init() { sdk.Register(provider{}) }
//	func main() {}
//
//	go get github.com/canvasapp/companion/providers/wasm/sdk@latest
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o mod.raw.wasm .
//	companion providers pack --manifest manifest.json -o mod.wasm mod.raw.wasm
//
// This module depends on the standard library only. Its manifest package
// validates and embeds manifests exactly as companion does, and
// cmd/wasmpack packs without a companion binary.
//
// The SDK owns the module's exports, its memory handed to and from the
// host, the JSON and the error envelope. Modules reach the network only
// through HTTP, naming an upstream from their manifest; the host adds the
// credentials, which the module never sees.
package sdk

import (
	"context"
	"fmt"
	"time"
)

// ABIVersion is the ABI this SDK implements.
const ABIVersion = 1

// Provider is what a module author implements. Each method runs once per
// host call, under the host's deadline (ctx carries it). Return *Error
// values (Errorf) to give the host a kind; any other error is reported as
// internal.
type Provider interface {
	// Describe returns the module's name and version, which must match
	// its manifest, and optionally its capabilities (which must too).
	Describe(ctx context.Context) (Info, error)
	// List returns every box of the account this module manages.
	List(ctx context.Context, acct Account) ([]Box, error)
	// Get returns one box, or a NotFound error.
	Get(ctx context.Context, acct Account, id string) (Box, error)
	// Create makes a box. The box must carry spec.Labels (at least
	// LabelWorkspace) so the host can match it to its workspace; creating
	// twice for one workspace returns the existing box or a Conflict error.
	Create(ctx context.Context, acct Account, spec CreateSpec) (Box, error)
	// Suspend pauses a box; suspending a paused box succeeds.
	Suspend(ctx context.Context, acct Account, id string) (Box, error)
	// Resume wakes a box; resuming a running box succeeds.
	Resume(ctx context.Context, acct Account, id string) (Box, error)
	// Delete destroys a box; deleting a box that is gone succeeds.
	Delete(ctx context.Context, acct Account, id string) error
}

// Unimplemented answers every op with an Invalid "not supported" error.
// Embed it and override what the module does.
type Unimplemented struct{}

func unsupported(op string) error { return Errorf(Invalid, "this provider does not support %s", op) }

func (Unimplemented) Describe(context.Context) (Info, error)       { return Info{}, unsupported("describe") }
func (Unimplemented) List(context.Context, Account) ([]Box, error) { return nil, unsupported("list") }
func (Unimplemented) Get(context.Context, Account, string) (Box, error) {
	return Box{}, unsupported("get")
}
func (Unimplemented) Create(context.Context, Account, CreateSpec) (Box, error) {
	return Box{}, unsupported("create")
}
func (Unimplemented) Suspend(context.Context, Account, string) (Box, error) {
	return Box{}, unsupported("suspend")
}
func (Unimplemented) Resume(context.Context, Account, string) (Box, error) {
	return Box{}, unsupported("resume")
}
func (Unimplemented) Delete(context.Context, Account, string) error { return unsupported("delete") }

// Info is the result of Describe. A module's deletion clocks are not here:
// they are declared in its manifest alone (manifest.Clock; ABI.md,
// "Deletion clocks"), so companion can show them without running it.
type Info struct {
	Name    string
	Version string
	// Capabilities, when set, must equal the manifest's.
	Capabilities *Capabilities
}

// Capabilities mirror the manifest's capability flags.
type Capabilities struct {
	List               bool `json:"list"`
	LastActivity       bool `json:"last_activity"`
	Suspend            bool `json:"suspend"`
	SuspendKeepsFiles  bool `json:"suspend_keeps_files"`
	SuspendKeepsMemory bool `json:"suspend_keeps_memory"`
	ResumeSameIdentity bool `json:"resume_same_identity"`
	Delete             bool `json:"delete"`
	NativeIdlePause    bool `json:"native_idle_pause"`
	NativePausedTTL    bool `json:"native_paused_ttl"`
}

// Account is the account an op runs for: its id and non-secret settings
// (the config fields of the manifest). Credentials are not here: the host
// injects them into requests.
type Account struct {
	ID     string
	Config map[string]string
}

// State is a box's state.
type State string

// The states a module may report.
const (
	Creating State = "creating"
	Running  State = "running"
	Pausing  State = "pausing"
	Paused   State = "paused"
	Resuming State = "resuming"
	Deleting State = "deleting"
	Deleted  State = "deleted"
	Failed   State = "error"
	Unknown  State = "unknown"
)

// LabelWorkspace is the label holding the workspace id on every box the
// module creates.
const LabelWorkspace = "companion.workspace"

// Box is one sandbox as the provider names it.
type Box struct {
	ID   string
	Name string
	// URL is the agent-server's base URL, if the provider exposes one.
	URL string
	// Key is the agent-server session key; the host treats it as a secret.
	Key            string
	State          State
	Labels         map[string]string
	CreatedAt      time.Time
	PausedAt       time.Time
	LastActivityAt time.Time
	Size           *Size
}

// Size is a box's storage size and where the figure came from.
type Size struct {
	Bytes int64
	// Source is SizeUsed or SizeAllocated (from the provider's API) or
	// SizeAgentServer.
	Source string
	At     time.Time
}

// Size sources a module may report.
const (
	SizeUsed        = "provider_api:used"
	SizeAllocated   = "provider_api:allocated"
	SizeAgentServer = "agent_server:used"
)

// CreateSpec is what a new box should be.
type CreateSpec struct {
	WorkspaceID string
	Name        string
	Lifecycle   Lifecycle
	// Options are provider-specific (image, template, region, ...).
	Options map[string]string
	// Labels must be put on the box; they include LabelWorkspace.
	Labels map[string]string
	// AgentKey is the agent-server session key companion generated for
	// the box: set it in the box's environment (OH_SESSION_API_KEYS_0)
	// where the provider allows it. Empty from hosts that predate it. A
	// secret: never put it in a label, a name or an error.
	AgentKey string
}

// Lifecycle holds settings the provider should enforce natively; zero
// means the provider default.
type Lifecycle struct {
	IdlePauseAfter time.Duration
	PausedTTL      time.Duration
}

// Kind classifies an error for the host.
type Kind string

// Error kinds. Forbidden comes only from the host (a refused request).
const (
	NotFound     Kind = "not_found"
	Conflict     Kind = "conflict"
	RateLimited  Kind = "rate_limited"
	Unauthorized Kind = "unauthorized"
	Unavailable  Kind = "unavailable"
	Invalid      Kind = "invalid"
	Internal     Kind = "internal"
	Forbidden    Kind = "forbidden"
)

// Error is an error with a kind. Its Message is shown to people.
type Error struct {
	Kind       Kind
	Message    string
	RetryAfter time.Duration
	// FromHost is true when the host refused or failed a request.
	FromHost bool
}

func (e *Error) Error() string { return string(e.Kind) + ": " + e.Message }

// Errorf returns an *Error of kind with a formatted message.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// RateLimitedError returns a RateLimited error asking the host to wait.
func RateLimitedError(retryAfter time.Duration, format string, args ...any) *Error {
	e := Errorf(RateLimited, format, args...)
	e.RetryAfter = retryAfter
	return e
}

var registered Provider

// Register makes p the module's provider. Call it from init: the host may
// call an op as soon as the module is instantiated.
func Register(p Provider) { registered = p }
