package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Container states (State.Status).
const (
	StateCreated    = "created"
	StateRunning    = "running"
	StatePaused     = "paused"
	StateRestarting = "restarting"
	StateRemoving   = "removing"
	StateExited     = "exited"
	StateDead       = "dead"
)

// MountVolume is the mount type of a volume.
const MountVolume = "volume"

// Kinds of FilesystemChange.
const (
	ChangeModify = 0
	ChangeAdd    = 1
	ChangeDelete = 2
)

// Inspect is GET /containers/{id}/json, reduced to what the provider reads.
type Inspect struct {
	ID              string           `json:"Id"`
	Name            string           `json:"Name"`
	Created         string           `json:"Created"`
	Image           string           `json:"Image"` // the image id
	State           *State           `json:"State"`
	Config          *Config          `json:"Config"`
	NetworkSettings *NetworkSettings `json:"NetworkSettings"`
	Mounts          []MountPoint     `json:"Mounts"`
}

// State is a container's state.
type State struct {
	Status     string `json:"Status"`
	Running    bool   `json:"Running"`
	Paused     bool   `json:"Paused"`
	Restarting bool   `json:"Restarting"`
	OOMKilled  bool   `json:"OOMKilled"`
	Dead       bool   `json:"Dead"`
	ExitCode   int    `json:"ExitCode"`
	StartedAt  string `json:"StartedAt"`
	FinishedAt string `json:"FinishedAt"`
}

// Config is a container's configuration, as created and as inspected.
type Config struct {
	Image        string              `json:"Image,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
	Cmd          StrSlice            `json:"Cmd,omitempty"`
	Entrypoint   StrSlice            `json:"Entrypoint,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	User         string              `json:"User,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"` // "8000/tcp"
}

// StrSlice is a command: the engine sends a list, older configurations a
// single string.
type StrSlice []string

// UnmarshalJSON takes a list, a string or null.
func (s *StrSlice) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = StrSlice{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

// HostConfig is the part of a create's host configuration the provider
// sets.
type HostConfig struct {
	PortBindings map[string][]PortBinding `json:"PortBindings,omitempty"`
	Mounts       []Mount                  `json:"Mounts,omitempty"`
}

// PortBinding is a host address for a container port. An empty HostPort
// in a create lets the engine pick one.
type PortBinding struct {
	HostIP   string `json:"HostIp"`
	HostPort string `json:"HostPort"`
}

// Mount is a mount to create.
type Mount struct {
	Type          string         `json:"Type"`
	Source        string         `json:"Source,omitempty"`
	Target        string         `json:"Target"`
	ReadOnly      bool           `json:"ReadOnly,omitempty"`
	VolumeOptions *VolumeOptions `json:"VolumeOptions,omitempty"`
}

// VolumeOptions are the options of a volume mount.
type VolumeOptions struct {
	Labels map[string]string `json:"Labels,omitempty"`
}

// MountPoint is an inspected container's mount.
type MountPoint struct {
	Type        string `json:"Type"`
	Name        string `json:"Name"`
	Source      string `json:"Source"`
	Destination string `json:"Destination"`
	RW          bool   `json:"RW"`
}

// NetworkSettings holds the published ports, by "port/proto".
type NetworkSettings struct {
	Ports map[string][]PortBinding `json:"Ports"`
}

// Summary is an item of GET /containers/json.
type Summary struct {
	ID string `json:"Id"`
}

// FilesystemChange is an item of GET /containers/{id}/changes.
type FilesystemChange struct {
	Path string `json:"Path"`
	Kind int    `json:"Kind"`
}

// Event is one message of GET /events.
type Event struct {
	Type   string `json:"Type"`
	Action string `json:"Action"`
	Actor  struct {
		ID string `json:"ID"`
	} `json:"Actor"`
}

// DiskUsage is what GET /system/df says about containers and volumes.
type DiskUsage struct {
	Containers []ContainerUsage
	Volumes    []VolumeUsage
}

// ContainerUsage is a container's writable layer size.
type ContainerUsage struct {
	ID     string `json:"Id"`
	SizeRw int64  `json:"SizeRw"`
}

// VolumeUsage is a volume's size; UsageData.Size is -1 when unknown.
type VolumeUsage struct {
	Name      string `json:"Name"`
	UsageData *struct {
		Size int64 `json:"Size"`
	} `json:"UsageData"`
}

// PullMessage is one line of an image pull's progress stream.
type PullMessage struct {
	Status         string    `json:"status"`
	ID             string    `json:"id"`
	ProgressDetail *Progress `json:"progressDetail"`
	// Error ends a failed pull; ErrorDetail carries the same message.
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// Progress is a layer's download progress in bytes.
type Progress struct {
	Current int64 `json:"current"`
	Total   int64 `json:"total"`
}

// ErrorMessage is the stream's error, "" when the message is none.
func (m *PullMessage) ErrorMessage() string {
	if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
		return m.ErrorDetail.Message
	}
	return m.Error
}

// ParsePort checks a container port ("8000", "8000/tcp") and returns it as
// the engine names it ("8000/tcp").
func ParsePort(s string) (string, error) {
	num, proto, _ := strings.Cut(s, "/")
	if proto == "" {
		proto = "tcp"
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("invalid port %q", s)
	}
	switch proto = strings.ToLower(proto); proto {
	case "tcp", "udp", "sctp":
	default:
		return "", fmt.Errorf("invalid protocol in port %q", s)
	}
	return strconv.Itoa(n) + "/" + proto, nil
}
