package digitalocean

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Session statuses (definitions.yml, SESSION_STATUS_*). ALL and
// UNSPECIFIED are list filters only.
const (
	StatusUnspecified  = "SESSION_STATUS_UNSPECIFIED"
	StatusProvisioning = "SESSION_STATUS_PROVISIONING"
	StatusReady        = "SESSION_STATUS_READY"
	StatusDetached     = "SESSION_STATUS_DETACHED"
	StatusDestroying   = "SESSION_STATUS_DESTROYING"
	StatusDestroyed    = "SESSION_STATUS_DESTROYED"
	StatusFailed       = "SESSION_STATUS_FAILED"
	StatusPaused       = "SESSION_STATUS_PAUSED"
	StatusAll          = "SESSION_STATUS_ALL"
	StatusLocked       = "SESSION_STATUS_LOCKED"
)

var sessionStatuses = []string{
	StatusProvisioning, StatusReady, StatusDetached, StatusDestroying,
	StatusDestroyed, StatusFailed, StatusPaused, StatusLocked,
}

// Pause reasons.
const (
	PauseManual     = "manual"
	PauseIdle       = "idle"
	PauseLowBalance = "low_balance"
)

// Session is one hosted-agent session as GET /v2/agents/sessions/{id}
// returns it inside {"session": …}. IdleTimeoutSeconds is omitted when the
// session uses the deployment-wide default (zero here).
type Session struct {
	SessionID          string    `json:"session_id"`
	Name               string    `json:"name"`
	TeamID             string    `json:"team_id"`
	AgentKind          string    `json:"agent_kind"`
	Status             string    `json:"status"`
	CreatedAt          time.Time `json:"created_at"`
	LastEventAt        time.Time `json:"last_event_at"`
	KeepWarm           bool      `json:"keep_warm"`
	PauseReason        string    `json:"pause_reason,omitempty"`
	IdleTimeoutSeconds int       `json:"idle_timeout_seconds,omitempty"`
	ConfigID           string    `json:"config_id,omitempty"`
	RepoHint           string    `json:"repo_hint,omitempty"`
	Origin             string    `json:"origin,omitempty"`
	ParentSessionID    string    `json:"parent_session_id,omitempty"`
}

// Config is one agent config (POST /v2/agents/configs {name,
// manifest_yaml} → 201 {config}). The id field's name is not in the
// reference; config_id mirrors session_id and the create-session body.
type Config struct {
	ConfigID     string    `json:"config_id"`
	Name         string    `json:"name"`
	TeamID       string    `json:"team_id"`
	ManifestYAML string    `json:"manifest_yaml"`
	CreatedAt    time.Time `json:"created_at"`
}

// manifest is what the emulator reads from a config's flat YAML manifest:
// agent, keep_warm and sandbox.idleTimeoutSeconds ("0 means tenant policy
// default").
type manifest struct {
	Agent       string
	Name        string
	KeepWarm    *bool
	IdleTimeout int
}

// parseManifest reads the small YAML subset the manifests use: "key:
// value" lines, one level of nesting by indentation, # comments, quoted
// scalars. Anything else is an error naming the line.
func parseManifest(src string) (manifest, error) {
	var m manifest
	section := ""
	sc := bufio.NewScanner(strings.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		if strings.HasPrefix(strings.TrimSpace(line), "#") || strings.TrimSpace(line) == "" {
			continue
		}
		indented := line[0] == ' ' || line[0] == '\t'
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			return m, fmt.Errorf("manifest line %d: want \"key: value\"", n)
		}
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"'`)
		if !indented {
			section = ""
			if v == "" {
				section = k
				continue
			}
		} else if section == "" {
			return m, fmt.Errorf("manifest line %d: unexpected indentation", n)
		}
		key := k
		if indented {
			key = section + "." + k
		}
		switch key {
		case "agent":
			m.Agent = v
		case "name":
			m.Name = v
		case "keep_warm":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return m, fmt.Errorf("manifest line %d: keep_warm must be true or false", n)
			}
			m.KeepWarm = &b
		case "sandbox.idleTimeoutSeconds":
			secs, err := strconv.Atoi(v)
			if err != nil || secs < 0 {
				return m, fmt.Errorf("manifest line %d: sandbox.idleTimeoutSeconds must be a non-negative integer", n)
			}
			m.IdleTimeout = secs
		}
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if m.Agent == "" {
		return m, fmt.Errorf("manifest: agent is required")
	}
	return m, nil
}
