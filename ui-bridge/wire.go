package uibridge

import (
	"encoding/json"
	"time"

	"github.com/canvasapp/companion/core"
)

// The types in this file are the wire contract (v1) documented in API.md.
// They are separate from core's types on purpose: a change in core must
// not silently change what front ends receive.

// Workspace is a workspace as front ends see it. Times are RFC 3339 in UTC
// with millisecond precision. A field whose value is null, false, 0 or ""
// is left out (API.md, "Omitted fields"), which keeps a snapshot of 10,000
// workspaces small; id, name, provider, account_id, state, created_at,
// updated_at and rev are always present. It never carries the box's key.
type Workspace struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Provider  string `json:"provider"`
	AccountID string `json:"account_id"`
	State     string `json:"state"`
	BoxID     string `json:"box_id,omitempty"`
	BoxURL    string `json:"box_url,omitempty"`
	Adopted   bool   `json:"adopted,omitempty"`
	// PausedAt is when the box was paused; paused age is
	// server_time − paused_at.
	PausedAt *time.Time `json:"paused_at,omitempty"`
	// StopReason is why a paused or stopped box is not running:
	// companion, provider_idle, outside, crashed, exited; absent while it
	// runs or when nobody can tell. ExitCode goes with it when known.
	StopReason *string `json:"stop_reason,omitempty"`
	ExitCode   *int    `json:"exit_code,omitempty"`
	// SizeBytes, SizeSource and SizeAt are absent together when no size
	// is known. SizeSource is "<origin>:<used|allocated>".
	SizeBytes      *int64     `json:"size_bytes,omitempty"`
	SizeSource     *string    `json:"size_source,omitempty"`
	SizeAt         *time.Time `json:"size_at,omitempty"`
	LastActivityAt *time.Time `json:"last_activity_at,omitempty"`
	Keep           bool       `json:"keep,omitempty"`
	DeleteAfter    *time.Time `json:"delete_after,omitempty"`
	Lifecycle      Lifecycle  `json:"lifecycle,omitzero"`
	// LastExportAt and LastExportID name the newest verified export.
	LastExportAt *time.Time `json:"last_export_at,omitempty"`
	LastExportID string     `json:"last_export_id,omitempty"`
	// Deletion is the provider's own deletion clock running on the paused
	// box; absent when none runs.
	Deletion Deletion `json:"deletion,omitzero"`
	// Progress says what a running action waits for (an image pull).
	Progress string `json:"progress,omitempty"`
	// Error is the last action's failure; absent when it succeeded.
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Rev is the feed revision of the workspace's last change.
	Rev int64 `json:"rev"`
}

// Lifecycle is the settings chosen at creation, in whole seconds; an
// absent setting (or an absent lifecycle) means the provider's default.
type Lifecycle struct {
	IdlePauseAfterSeconds int64 `json:"idle_pause_after_seconds,omitempty"`
	PausedTTLSeconds      int64 `json:"paused_ttl_seconds,omitempty"`
}

// Deletion is the provider's deletion clock that deletes a paused box
// first (GET /v1/providers lists each provider's clocks).
type Deletion struct {
	Clock string `json:"clock,omitempty"`
	// DueAt is when it deletes; absent when the provider does not
	// publish it (it may strike at any time).
	DueAt *time.Time `json:"due_at,omitempty"`
	// AtRisk: no verified export holds the box as it is.
	AtRisk bool `json:"at_risk,omitempty"`
	// ExportBy is when serve's guard exports it; absent on the desktop.
	ExportBy *time.Time `json:"export_by,omitempty"`
}

// Account is a provider account. Credential values are never returned; only
// their names.
type Account struct {
	ID          string            `json:"id"`
	Provider    string            `json:"provider"`
	Label       string            `json:"label"`
	Config      map[string]string `json:"config"`
	Credentials []string          `json:"credentials"`
	CreatedAt   time.Time         `json:"created_at"`
	// Status is how companion's last look at the provider went; Flag a
	// problem that needs a person (see API.md, "Account status").
	Status AccountStatus `json:"status"`
	Flag   *AccountFlag  `json:"flag"`
	// Shared: usable by every user (serve mode's Docker account); only
	// its owner, an admin, may remove it.
	Shared bool `json:"shared"`
	// DeleteExport is "required" or "best_effort" (PATCH /v1/accounts/{id}).
	DeleteExport string `json:"delete_export"`
}

// Provider is an installed adapter and whether it can be used right now.
type Provider struct {
	Name         string        `json:"name"`
	Version      string        `json:"version"`
	Description  string        `json:"description"`
	Kind         string        `json:"kind"`
	Capabilities Capabilities  `json:"capabilities"`
	Credentials  []Credential  `json:"credentials"`
	Config       []ConfigField `json:"config"`
	// Options are the creation options the provider takes; null when it
	// does not declare them (then any option is passed through).
	Options []ConfigField `json:"options"`
	// Clocks are the provider's own deletion clocks; [] when it has none.
	Clocks    []Clock `json:"clocks"`
	Available bool    `json:"available"`
	Reason    string  `json:"reason"`
	// SHA256, Hosts and EndpointHosts describe a Wasm module (see
	// ModuleFacts); they are absent for adapters built in Go.
	SHA256        string   `json:"sha256,omitempty"`
	Hosts         []string `json:"hosts,omitempty"`
	EndpointHosts []string `json:"endpoint_hosts,omitempty"`
}

// Capabilities are the adapter's flags (DESIGN.md "Suspend comes in kinds").
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

// Clock is one of a provider's deletion clocks (core.DeletionClock): a
// timer of the provider's own that deletes a box, or its files, without
// companion asking. Its period is in seconds, as every duration here.
type Clock struct {
	Name string `json:"name"`
	// Starts is "paused" (the box was paused or stopped), "idle" (its
	// last activity) or "running" (the box was made; it runs only while
	// the box runs).
	Starts string `json:"starts"`
	// AfterSeconds is the period; 0 when the provider does not publish
	// it, or for a Setting clock (the workspace's paused TTL sets it).
	AfterSeconds int64 `json:"after_seconds"`
	// Loses is "box" (the box is deleted) or "files" (its files are).
	Loses string `json:"loses"`
	// Setting: the clock runs only when asked at create (paused TTL).
	Setting bool   `json:"setting"`
	Note    string `json:"note"`
}

// Credential names a secret an account of the provider needs.
type Credential struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Header      string `json:"header"`
}

// ConfigField is a non-secret account setting.
type ConfigField struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Example is a sample value, the form's placeholder; absent when the
	// provider gives none.
	Example  string `json:"example,omitempty"`
	Required bool   `json:"required"`
}

// DeletePreview is the answer to POST /v1/workspaces/{id}/delete-preview.
type DeletePreview struct {
	Workspace Workspace `json:"workspace"`
	// Token confirms the delete once, until ExpiresAt.
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	Lost      []string  `json:"lost"`
	Survives  []string  `json:"survives"`
	// Export is what the delete exports (and verifies) before the box goes.
	Export *DeleteExportPlan `json:"export"`
}

// Message is one WebSocket message from the server. Type is "snapshot"
// (Workspaces set), "upsert" (Workspace set) or "remove" (ID set).
// Clients must ignore types they do not know.
type Message struct {
	Type       string      `json:"type"`
	Rev        int64       `json:"rev"`
	ServerTime time.Time   `json:"server_time"`
	Workspaces []Workspace `json:"workspaces,omitempty"`
	Workspace  *Workspace  `json:"workspace,omitempty"`
	ID         string      `json:"id,omitempty"`
	// Account is set on "account" messages: an account's status or flag
	// changed.
	Account *Account `json:"account,omitempty"`
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong. State is set on conflicts caused by an
// illegal transition: the workspace's current state.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	State   string `json:"state,omitempty"`
	// Module, Operation and Field name what a provider module did wrong,
	// on errors a module caused.
	Module    string `json:"module,omitempty"`
	Operation string `json:"operation,omitempty"`
	Field     string `json:"field,omitempty"`
}

// wireTime is t in UTC at millisecond precision: every JavaScript Date
// parser accepts it.
func wireTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func wireTimePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	w := wireTime(t)
	return &w
}

func toWireWorkspace(ws core.Workspace) Workspace {
	w := Workspace{
		ID:             ws.ID,
		Name:           ws.Name,
		Provider:       ws.Provider,
		AccountID:      ws.AccountID,
		State:          string(ws.State),
		BoxID:          ws.BoxID,
		BoxURL:         ws.BoxURL,
		Adopted:        ws.Adopted,
		PausedAt:       wireTimePtr(ws.PausedAt),
		LastActivityAt: wireTimePtr(ws.LastActivityAt),
		Keep:           ws.Keep,
		DeleteAfter:    wireTimePtr(ws.DeleteAfter),
		Lifecycle: Lifecycle{
			IdlePauseAfterSeconds: int64(ws.Lifecycle.IdlePauseAfter / time.Second),
			PausedTTLSeconds:      int64(ws.Lifecycle.PausedTTL / time.Second),
		},
		LastExportAt: wireTimePtr(ws.LastExportAt),
		LastExportID: ws.LastExportID,
		Deletion: Deletion{
			Clock:    ws.DeletionClock,
			DueAt:    wireTimePtr(ws.DeletionDueAt),
			AtRisk:   ws.AtRisk,
			ExportBy: wireTimePtr(ws.ExportBy),
		},
		Progress:  ws.Progress,
		Error:     ws.Error,
		CreatedAt: wireTime(ws.CreatedAt),
		UpdatedAt: wireTime(ws.UpdatedAt),
		Rev:       ws.Rev,
	}
	if ws.StopReason != core.StopNone {
		r := string(ws.StopReason)
		w.StopReason = &r
	}
	if ws.ExitCode != nil {
		c := *ws.ExitCode
		w.ExitCode = &c
	}
	if ws.Size != nil {
		b, src := ws.Size.Bytes, string(ws.Size.Source)
		w.SizeBytes, w.SizeSource, w.SizeAt = &b, &src, wireTimePtr(ws.Size.At)
	}
	return w
}

// encodeWorkspace is the JSON of ws's wire form. It cannot fail: every
// field is a plain value.
func encodeWorkspace(ws core.Workspace) []byte {
	w := toWireWorkspace(ws)
	return encodeWire(&w)
}

func encodeWire(w *Workspace) []byte {
	b, err := json.Marshal(w)
	if err != nil {
		panic("uibridge: encoding a workspace: " + err.Error())
	}
	return b
}

func toWireAccount(a core.Account, st core.AccountStatus) Account {
	w := Account{
		ID:           a.ID,
		Provider:     a.Provider,
		Label:        a.Label,
		Config:       a.Config,
		Credentials:  a.Credentials,
		CreatedAt:    wireTime(a.CreatedAt),
		Shared:       a.Shared,
		DeleteExport: string(a.DeleteExport.Effective()),
		Status: AccountStatus{
			State:         string(st.State),
			ErrorCode:     string(st.Kind),
			Message:       st.Message,
			LastOKAt:      wireTimePtr(st.LastOKAt),
			NextAttemptAt: wireTimePtr(st.NextAttemptAt),
		},
	}
	if st.Flag != nil {
		w.Flag = &AccountFlag{Code: st.Flag.Code, Message: st.Flag.Message, Since: wireTime(st.Flag.Since)}
	}
	if w.Config == nil {
		w.Config = map[string]string{}
	}
	if w.Credentials == nil {
		w.Credentials = []string{}
	}
	return w
}

func toWireProvider(p core.ProviderStatus) Provider {
	c := p.Info.Capabilities
	w := Provider{
		Name:        p.Info.Name,
		Version:     p.Info.Version,
		Description: p.Info.Description,
		Kind:        p.Info.Kind,
		Capabilities: Capabilities{
			List:               c.List,
			LastActivity:       c.LastActivity,
			Suspend:            c.Suspend,
			SuspendKeepsFiles:  c.SuspendKeepsFiles,
			SuspendKeepsMemory: c.SuspendKeepsMemory,
			ResumeSameIdentity: c.ResumeSameIdentity,
			Delete:             c.Delete,
			NativeIdlePause:    c.NativeIdlePause,
			NativePausedTTL:    c.NativePausedTTL,
		},
		Credentials: make([]Credential, 0, len(p.Info.Credentials)),
		Config:      make([]ConfigField, 0, len(p.Info.Config)),
		Clocks:      make([]Clock, 0, len(p.Info.Clocks)),
		Available:   p.Available,
		Reason:      p.Reason,
	}
	for _, cr := range p.Info.Credentials {
		w.Credentials = append(w.Credentials, Credential{Name: cr.Name, Description: cr.Description, Header: cr.Header})
	}
	for _, f := range p.Info.Config {
		w.Config = append(w.Config, ConfigField{Name: f.Name, Description: f.Description, Example: f.Example, Required: f.Required})
	}
	for _, c := range p.Info.Clocks {
		w.Clocks = append(w.Clocks, Clock{Name: c.Name, Starts: c.Starts, AfterSeconds: int64(c.After / time.Second),
			Loses: c.Loses, Setting: c.Setting, Note: c.Note})
	}
	if p.Info.Options != nil {
		w.Options = make([]ConfigField, 0, len(p.Info.Options))
		for _, f := range p.Info.Options {
			w.Options = append(w.Options, ConfigField{Name: f.Name, Description: f.Description, Example: f.Example})
		}
	}
	return w
}
