// Package modal is companion's built-in provider for Modal Sandboxes,
// written with Modal's own Go SDK (github.com/modal-labs/modal-client/go).
// Modal's control plane speaks only gRPC, which the Wasm host's HTTP
// function cannot carry, so this adapter is Go, not a module.
//
// A box is one Modal sandbox (a V1 id, "sb-" and 22 characters), tagged
// with the account, the workspace and (on a shared account) the owner, so
// List adopts only this account's own sandboxes. It runs the agent-server
// image with port 8000 as an encrypted tunnel, the account's idle timeout
// (Modal terminates an idle sandbox on its own: "native first") and its
// lifetime timeout (at most 24 h at Modal).
//
// Modal has no pause. Suspend takes a filesystem snapshot (an image with
// a TTL), records it in the sandbox's tags, then terminates the sandbox:
// the terminated sandbox with a live snapshot is the paused box. Where
// the account enables it (memory_snapshot), the sandbox is created with
// memory snapshots on and a pause also takes one (kept 7 days); a resume
// within them restores the running processes too, else it falls back to
// the filesystem snapshot. Resume
// creates a new sandbox from the snapshot: a new box id, tunnel URL and
// agent-server key every time; core's stable workspace id hides the
// change. The new sandbox is tagged with the one it replaced, so a resume
// retried after a crash finds it instead of making a second one. Delete
// terminates the sandbox and deletes its snapshot image.
//
// The agent-server's key is derived, never stored: HMAC-SHA256 of the
// account's token secret over a random nonce kept in a tag. Only someone
// holding the token can compute it, a resume picks a new nonce (so the old
// key stops working), and Get reports it (ProviderSessionKey).
//
// Rule 2 of DESIGN.md: any open TCP connection through a Modal tunnel
// counts as activity and keeps the sandbox awake (and billing). This
// adapter never connects through a tunnel: List, Get and Endpoint are
// control-plane calls only (SandboxList, SandboxWait, SandboxTagsGet,
// SandboxGetTunnels). Only a person's action (open the agent, export)
// makes core connect to the URL Endpoint returns.
package modal

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/core"
)

// Tags companion puts on its sandboxes.
const (
	TagAccount     = "companion.account"
	TagName        = "companion.name"
	TagKeyNonce    = "companion.key_nonce"
	TagSnapshot    = "companion.snapshot"
	TagPausedAt    = "companion.paused_at"
	TagCreatedAt   = "companion.created_at" // RFC 3339, just before the create: the lifetime's start
	TagResumedFrom = "companion.resumed_from"
	// TagMemory marks a sandbox created with memory snapshots enabled;
	// TagMemorySnapshot holds its pause's memory snapshot.
	TagMemory         = "companion.memory"
	TagMemorySnapshot = "companion.memory_snapshot"
)

// Credentials and settings.
const (
	CredTokenID     = "token_id"
	CredTokenSecret = "token_secret"

	ConfigApp         = "app_name"
	ConfigEnvironment = "environment"
	ConfigImage       = "image"
	ConfigServerURL   = "server_url"
	ConfigIdleTimeout = "idle_timeout"
	ConfigMemory      = "memory_snapshot"

	// OptionImage is the creation option that overrides the image.
	OptionImage = "image"
)

// Defaults.
const (
	Version            = "1.0.0"
	DefaultApp         = "companion"
	DefaultImage       = "ghcr.io/all-hands-ai/agent-server:latest"
	DefaultIdleTimeout = 30 * time.Minute
	// Lifetime is every sandbox's timeout: Modal's longest. It is not a
	// setting, so the lifetime clock companion declares is always right.
	Lifetime = 24 * time.Hour
	// SnapshotTTL is how long a pause's filesystem snapshot lives at
	// Modal before it expires on its own (the SDK's default, 30 days).
	SnapshotTTL = 30 * 24 * time.Hour

	agentPort = 8000
	keyEnv    = "OH_SESSION_API_KEYS_0"
	workdir   = "/workspace"
	// callTimeout bounds every SDK call: a control plane that accepts the
	// connection and never answers turns into "unavailable".
	callTimeout = 60 * time.Second
	// createTimeout bounds a create, which may wait for an image build.
	createTimeout = 10 * time.Minute
)

// Config configures a Provider.
type Config struct {
	// Secrets holds the accounts' credentials (core.CredentialKey).
	Secrets core.Secrets
	Logger  *slog.Logger
	// Observe, when set, is told about every box method call.
	Observe func(op string, d time.Duration, err error)
}

// Provider is the Modal adapter; safe for concurrent use.
type Provider struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	clients map[string]*client // by account id
}

var (
	_ core.Provider         = (*Provider)(nil)
	_ core.EndpointReporter = (*Provider)(nil)
)

// New returns a Modal adapter.
func New(cfg Config) *Provider {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Provider{cfg: cfg, log: log.With("provider", "modal"), clients: map[string]*client{}}
}

// Close releases the SDK clients.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, c := range p.clients {
		c.sdk.Close()
		delete(p.clients, id)
	}
	return nil
}

// Describe implements core.Provider.
func (p *Provider) Describe(ctx context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{
		Name:        "modal",
		Version:     Version,
		Kind:        "builtin",
		Description: "Modal Sandboxes (gRPC, through Modal's Go SDK). A pause is a filesystem snapshot, and a resume a new sandbox from it.",
		Capabilities: core.Capabilities{
			List:              true,
			Suspend:           true,
			SuspendKeepsFiles: true,
			Delete:            true,
			// The snapshot a pause leaves expires at Modal on its own.
			NativePausedTTL: true,
		},
		ProviderSessionKey: true,
		Credentials: []core.CredentialSpec{
			{Name: CredTokenID, Description: "Modal token id (ak-…), from modal.com → Settings → API Tokens, or `modal token new`", Header: "x-modal-token-id"},
			{Name: CredTokenSecret, Description: "Modal token secret (as-…), shown once with the token id", Header: "x-modal-token-secret"},
		},
		Config: []core.ConfigField{
			{Name: ConfigApp, Description: "Modal app the sandboxes are created under (made if missing); default " + DefaultApp, Example: "companion"},
			{Name: ConfigEnvironment, Description: "Modal environment; empty means the workspace's default environment", Example: "main"},
			{Name: ConfigImage, Description: "agent-server image (a registry tag) for new sandboxes; it must serve the agent-server on port 8000; default " + DefaultImage, Example: DefaultImage},
			{Name: ConfigIdleTimeout, Description: "Modal terminates a sandbox idle this long (no exec, no open tunnel connection); companion pauses nothing on a timer, so files of a sandbox that idles out are lost. Default 30m, or the workspace's idle_pause_after", Example: "30m"},
			{Name: ConfigMemory, Description: "true: a pause also takes a memory snapshot (Modal alpha; kept 7 days), and a resume within them restores running processes; the filesystem snapshot stays the fallback. Default false", Example: "true"},
			{Name: ConfigServerURL, Description: "Modal control plane URL, for tests against an emulator (http:// only on loopback); default https://api.modal.com:443. The MODAL_SERVER_URL environment variable, when set, overrides it in the SDK", Example: "http://127.0.0.1:50051"},
		},
		Options: []core.ConfigField{{Name: OptionImage, Description: "agent-server image for this workspace instead of the account's", Example: DefaultImage}},
		// Modal's idle timeout also ends a running sandbox, files and all,
		// but Modal reports no last activity to time it from; it is a
		// setting, and the guide says what it costs. The lifetime is fixed
		// (Modal's longest), so the guard can pause before it ends.
		Clocks: []core.DeletionClock{
			{Name: "lifetime", Starts: core.ClockStartsRunning, After: Lifetime, Loses: core.ClockLosesBox,
				Note: "Modal terminates a sandbox at its timeout, at most 24 h after it was made, files and all; every resume makes a new sandbox (providers-wave3.md §3.4, Sandbox.timeout_secs). companion sets the longest, and serve pauses (a snapshot) an hour before"},
			{Name: "snapshot_expiry", Starts: core.ClockStartsPaused, After: SnapshotTTL, Loses: core.ClockLosesBox,
				Note: "a pause's filesystem snapshot is made with a 30-day TTL and Modal deletes it then (providers-wave3.md §3.4, TaskSnapshotFilesystem ttl_seconds)"},
		},
	}, nil
}

// agentKey derives a box's agent-server key from the token secret and
// the box's nonce.
func agentKey(secret, nonce string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("companion agent-server key\x00" + nonce))
	return hex.EncodeToString(m.Sum(nil))
}

func newNonce() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validID reports whether id is a V1 sandbox id ("sb-" and 22 of
// [0-9A-Za-z]); the SDK routes any other id to the V2 API, which this
// adapter does not use, so such an id is no box of ours.
func validID(id string) bool {
	rest, ok := strings.CutPrefix(id, "sb-")
	if !ok || len(rest) != 22 {
		return false
	}
	for _, c := range rest {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

func durationSetting(acct core.Account, name string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(acct.Config[name])
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, core.Errorf(core.KindInvalid, "modal setting %s=%q is not a positive duration such as 30m", name, v)
	}
	return d, nil
}

func (p *Provider) observe(op string, start time.Time, err error) {
	if p.cfg.Observe != nil {
		p.cfg.Observe(op, time.Since(start), err)
	}
}

func notFound(id string) error {
	return core.Errorf(core.KindNotFound, "box %s not found at Modal", id)
}
