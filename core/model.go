package core

import "time"

// Capabilities are what a provider can do, declared by its adapter. The UI
// and the retention policy read these flags, never provider names.
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

// CredentialSpec names one secret an account of a provider needs, such as an
// API token. The value lives in the secret store, never in SQLite.
type CredentialSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Header is where the credential is sent (for Wasm adapters, the host
	// injects it), e.g. "Authorization: Bearer {token}". Informational.
	Header string `json:"header,omitempty"`
}

// ConfigField is one non-secret account setting, such as a region or a base
// URL override for a self-hosted deployment.
type ConfigField struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Example is a sample value (a form shows it as the placeholder).
	Example  string `json:"example,omitempty"`
	Required bool   `json:"required,omitempty"`
}

// ProviderInfo describes an adapter.
type ProviderInfo struct {
	Name         string           `json:"name"`
	Version      string           `json:"version"`
	Description  string           `json:"description,omitempty"`
	Kind         string           `json:"kind"` // "builtin" or "wasm"
	Capabilities Capabilities     `json:"capabilities"`
	Credentials  []CredentialSpec `json:"credentials"`
	Config       []ConfigField    `json:"config"`
	// Options are the creation options (CreateSpec.Options) the adapter
	// takes. nil means the adapter did not declare them, and any option is
	// passed through; an empty, non-nil list means it takes none.
	Options []ConfigField `json:"options"`
	// Clocks are the provider's own deletion clocks (clocks.go).
	Clocks []DeletionClock `json:"clocks"`
	// ProviderSessionKey marks a provider that issues its boxes'
	// agent-server keys itself and may replace them (the OpenHands
	// runtime-api, at every resume): the key is the one Get reports, not
	// the one companion generated.
	ProviderSessionKey bool `json:"provider_session_key,omitempty"`
}

// Account is one set of credentials for one provider. Its secrets are kept
// in the secret store under keys derived from its ID (see CredentialKey).
type Account struct {
	ID       string `json:"id"`
	Owner    string `json:"-"` // user id in serve mode; "" on the desktop
	Provider string `json:"provider"`
	Label    string `json:"label"`
	// Config holds non-secret settings named by the provider's ConfigFields.
	Config map[string]string `json:"config"`
	// Credentials lists the names of the secrets stored for this account;
	// the values themselves are never loaded into this struct.
	Credentials []string  `json:"credentials"`
	CreatedAt   time.Time `json:"created_at"`
	// Shared accounts (serve mode's built-in Docker account, made by an
	// admin) are usable by every user; each workspace made on one belongs
	// to the user who made it, and only Owner may remove the account.
	Shared bool `json:"shared"`
	// DeleteExport says whether a delete needs a verified export first
	// ("" or DeleteExportRequired) or may go ahead when it fails
	// (DeleteExportBestEffort). Only a person's explicit setting makes it
	// best-effort (SetDeleteExport).
	DeleteExport DeleteExportMode `json:"delete_export,omitempty"`
}

// CredentialKey is the secret-store key of one credential of an account.
func CredentialKey(accountID, credential string) string {
	return "account/" + accountID + "/" + credential
}

// SizeSource says where a size figure came from and whether it counts space
// used or only space allocated, as "<origin>:<used|allocated>".
type SizeSource string

const (
	SizeDockerEngineUsed     SizeSource = "docker_engine:used"
	SizeAgentServerUsed      SizeSource = "agent_server:used"
	SizeProviderAPIUsed      SizeSource = "provider_api:used"
	SizeProviderAPIAllocated SizeSource = "provider_api:allocated"
)

// Size is a box's storage size, honest about its source and age.
type Size struct {
	Bytes  int64
	Source SizeSource
	At     time.Time
}

// Box is one sandbox as the provider names it. Its identity (ID, URL, Key)
// may change on resume at snapshot-and-restore providers.
type Box struct {
	ID   string
	Name string
	// URL is the agent-server's base URL, when the provider exposes one.
	URL string
	// Key is the agent-server session key. It is a secret: companion never
	// stores it; adapters fetch it from the provider when needed.
	Key   string
	State State
	// Labels carry companion's own markers, chiefly LabelWorkspace, so a box
	// can be matched to its workspace after a crash.
	Labels    map[string]string
	CreatedAt time.Time
	// PausedAt is when the provider says the box was paused; zero if the
	// provider does not report it.
	PausedAt time.Time
	// LastActivityAt is the provider's (or agent-server's) last-activity
	// time; zero if unknown.
	LastActivityAt time.Time
	Size           *Size
	// StopReason is why a box that is not running stopped, as far as the
	// provider can tell ("" when it cannot). StopCompanion is never set by
	// an adapter: only core knows that it asked.
	StopReason StopReason
	// ExitCode is the exit status of a stopped box's main process, when
	// the provider reports one.
	ExitCode *int
}

// LabelWorkspace is the label (or tag, or metadata key) an adapter puts on
// every box it creates, holding the workspace id.
const LabelWorkspace = "companion.workspace"

// LabelOwner is the label an adapter puts on a box of a shared account,
// holding the user who made it, so a box found again after its record was
// lost is adopted for that user and no other.
const LabelOwner = "companion.owner"

// Lifecycle holds the settings chosen at creation that the provider enforces
// natively where it can ("native first"). Zero means the provider default.
type Lifecycle struct {
	// IdlePauseAfter asks the provider to pause the box after this much
	// inactivity.
	IdlePauseAfter time.Duration `json:"idle_pause_after,omitempty"`
	// PausedTTL asks the provider to delete (or archive) a box that stayed
	// paused this long.
	PausedTTL time.Duration `json:"paused_ttl,omitempty"`
}

// Workspace is companion's stable handle on a person's sandbox. Front ends
// and the database use its ID; the box behind it may change.
type Workspace struct {
	ID        string
	Owner     string
	Name      string
	AccountID string
	Provider  string
	State     State
	// BoxID and BoxURL identify the current box; empty while creating.
	BoxID  string
	BoxURL string
	// Adopted is true for boxes companion found at the provider but did not
	// create.
	Adopted   bool
	Lifecycle Lifecycle
	// Options are provider-specific creation options (image, template,
	// region), kept so a failed create can be retried after a restart.
	Options        map[string]string
	PausedAt       time.Time
	LastActivityAt time.Time
	Size           *Size
	Keep           bool
	DeleteAfter    time.Time
	// StopReason is why the box is paused or stopped; "" while it runs or
	// when nobody can tell. ExitCode goes with it when known.
	StopReason StopReason
	ExitCode   *int
	// Progress says what a running action is waiting for right now (an
	// image pull, say); empty otherwise. It is not kept across restarts.
	Progress string
	// Error is the last action's failure, shown to the person; empty when
	// the last action succeeded.
	Error     string
	CreatedAt time.Time
	UpdatedAt time.Time
	// LastExportAt and LastExportID are the newest verified export of the
	// workspace: when it was verified, and its id.
	LastExportAt time.Time
	LastExportID string
	// DeletionClock, DeletionDueAt and AtRisk are derived on every save
	// (deletion.go): the provider's deletion clock that applies to the
	// workspace and deletes first, when it will (zero when the provider
	// does not publish it, or the clock has not started), and whether it
	// runs with no verified export made since it started.
	DeletionClock string
	DeletionDueAt time.Time
	AtRisk        bool
	// ExportBy is when serve's guard exports an at-risk workspace
	// (guard.go); zero when not at risk, and on the desktop, which has no
	// guard.
	ExportBy time.Time
	// BoxCreatedAt is when the provider made the current box (Box.CreatedAt;
	// zero if it does not say). A running deletion clock starts there.
	BoxCreatedAt time.Time
	// Rev is the feed revision of the last change to this workspace.
	Rev int64
	// Removed marks a tombstone: the workspace is gone and the feed reports
	// it as a remove event.
	Removed bool
}

// UndescribedFields names the account settings and creation options of p
// that lack a description or an example ("config.api_url: example"), so
// a first-party adapter can be held to documenting each of them.
func (p ProviderInfo) UndescribedFields() []string {
	var out []string
	check := func(kind string, fields []ConfigField) {
		for _, f := range fields {
			if f.Description == "" {
				out = append(out, kind+"."+f.Name+": description")
			}
			if f.Example == "" {
				out = append(out, kind+"."+f.Name+": example")
			}
		}
	}
	check("config", p.Config)
	check("options", p.Options)
	return out
}
