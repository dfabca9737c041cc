package daytona

import (
	"encoding/json"
	"maps"
	"time"
)

// Sandbox states, from the SandboxState enum in Daytona's OpenAPI spec. The
// emulator moves boxes through the subset below.
const (
	StateCreating   = "creating"
	StateStarted    = "started"
	StateStarting   = "starting"
	StateStopping   = "stopping"
	StateStopped    = "stopped"
	StateArchiving  = "archiving"
	StateArchived   = "archived"
	StateRestoring  = "restoring"
	StatePausing    = "pausing"
	StatePaused     = "paused"
	StateResuming   = "resuming"
	StateDestroying = "destroying"
	StateDestroyed  = "destroyed"
	StateError      = "error"
)

// allStates is the full SandboxState enum, for validating list filters.
var allStates = []string{
	"creating", "restoring", "destroyed", "destroying", "started", "stopped", "starting", "stopping",
	"error", "build_failed", "pending_build", "building_snapshot", "unknown", "pulling_snapshot",
	"archived", "archiving", "resizing", "snapshotting", "forking", "pausing", "paused", "resuming",
}

// transitional maps each in-progress state to the state it settles in.
var transitional = map[string]string{
	StateCreating:   StateStarted,
	StateStarting:   StateStarted,
	StateRestoring:  StateStarted,
	StateResuming:   StateStarted,
	StateStopping:   StateStopped,
	StateArchiving:  StateArchived,
	StatePausing:    StatePaused,
	StateDestroying: StateDestroyed,
}

// Lifecycle defaults from Daytona's docs (sandboxes.mdx, "Automated
// lifecycle management"), in minutes.
const (
	DefaultAutoStop    = 15
	DefaultAutoArchive = 7 * 24 * 60
	MaxAutoArchive     = 30 * 24 * 60 // what autoArchiveInterval 0 means
	DefaultAutoDelete  = -1           // disabled
)

// Sandbox is one Daytona sandbox as the API returns it (the Sandbox schema;
// list items are the same minus env). Times are sent the way the NestJS API
// sends them: ISO 8601 in UTC with milliseconds.
type Sandbox struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId"`
	Name                string            `json:"name"`
	Target              string            `json:"target"`
	RunnerID            string            `json:"runnerId"`
	SandboxClass        string            `json:"sandboxClass"`
	State               string            `json:"state"`
	DesiredState        string            `json:"desiredState"`
	Snapshot            string            `json:"snapshot"`
	User                string            `json:"user"`
	ErrorReason         string            `json:"errorReason,omitempty"`
	Recoverable         bool              `json:"recoverable"`
	Public              bool              `json:"public"`
	CPU                 float64           `json:"cpu"`
	GPU                 float64           `json:"gpu"`
	Memory              float64           `json:"memory"`
	Disk                float64           `json:"disk"`
	Labels              map[string]string `json:"labels"`
	Env                 map[string]string `json:"env,omitempty"`
	BackupState         string            `json:"backupState"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	CreatedAt           time.Time         `json:"-"`
	UpdatedAt           time.Time         `json:"-"`
	LastActivityAt      time.Time         `json:"-"`
	DaemonVersion       string            `json:"daemonVersion"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
}

// jsTime is the format of JavaScript's Date.toISOString.
const jsTime = "2006-01-02T15:04:05.000Z"

// MarshalJSON writes the times in the API's format.
func (s Sandbox) MarshalJSON() ([]byte, error) {
	type plain Sandbox
	return json.Marshal(struct {
		plain
		CreatedAt      string `json:"createdAt"`
		UpdatedAt      string `json:"updatedAt"`
		LastActivityAt string `json:"lastActivityAt"`
	}{plain(s), s.CreatedAt.UTC().Format(jsTime), s.UpdatedAt.UTC().Format(jsTime), s.LastActivityAt.UTC().Format(jsTime)})
}

// UnmarshalJSON reads what MarshalJSON writes (tests decode responses).
func (s *Sandbox) UnmarshalJSON(b []byte) error {
	type plain Sandbox
	var v struct {
		plain
		CreatedAt      time.Time `json:"createdAt"`
		UpdatedAt      time.Time `json:"updatedAt"`
		LastActivityAt time.Time `json:"lastActivityAt"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Sandbox(v.plain)
	s.CreatedAt, s.UpdatedAt, s.LastActivityAt = v.CreatedAt, v.UpdatedAt, v.LastActivityAt
	return nil
}

func (s Sandbox) clone() Sandbox {
	s.Labels = maps.Clone(s.Labels)
	s.Env = maps.Clone(s.Env)
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	return s
}

// listItem is the SandboxListItem form: the sandbox without env.
func (s Sandbox) listItem() Sandbox {
	s = s.clone()
	s.Env = nil
	return s
}

// SeedSandbox describes a sandbox to put straight into the emulator, as if
// something other than companion had created it. Zero fields get the same
// defaults as POST /sandbox; nil intervals get the API defaults.
type SeedSandbox struct {
	ID                  string            `json:"id,omitempty"`
	Name                string            `json:"name,omitempty"`
	State               string            `json:"state,omitempty"` // a settled state; default started
	SandboxClass        string            `json:"sandboxClass,omitempty"`
	Snapshot            string            `json:"snapshot,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
	Env                 map[string]string `json:"env,omitempty"`
	AutoStopInterval    *int              `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval,omitempty"`
	CreatedAt           time.Time         `json:"createdAt,omitzero"`
	LastActivityAt      time.Time         `json:"lastActivityAt,omitzero"`
	ErrorReason         string            `json:"errorReason,omitempty"`
}
