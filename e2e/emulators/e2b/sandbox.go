package e2b

import (
	"maps"
	"time"
)

// Sandbox states as the API reports them.
const (
	StateRunning = "running"
	StatePaused  = "paused"
)

// Sandbox is one E2B sandbox in the ListedSandbox shape (spec/openapi.yml).
// For a paused sandbox EndAt is the moment it was paused: the list handler
// fills endAt from the snapshot's creation time (handlers/sandboxes_list.go).
type Sandbox struct {
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias,omitempty"`
	SandboxID   string            `json:"sandboxID"`
	ClientID    string            `json:"clientID"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	State       string            `json:"state"`
	EnvdVersion string            `json:"envdVersion"`

	// AutoPause makes the timeout pause instead of kill (NewSandbox.autoPause).
	AutoPause bool `json:"-"`
	// AutoResume is NewSandbox.autoResume.enabled; the emulator only reports it.
	AutoResume bool `json:"-"`
	// Secure sandboxes get an envd access token.
	Secure bool `json:"-"`
	// Private is network.allowPublicTraffic=false: the proxy then wants
	// the traffic access token, which only create and connect return.
	Private bool `json:"-"`
	// EnvVars is NewSandbox.envVars (never returned by the API).
	EnvVars map[string]string `json:"-"`
}

func (s Sandbox) clone() Sandbox {
	s.Metadata = maps.Clone(s.Metadata)
	return s
}

// Lifecycle is SandboxDetail.lifecycle.
type Lifecycle struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"` // kill | pause
}

// Detail is the SandboxDetail shape GET /sandboxes/{id} returns.
type Detail struct {
	Sandbox
	EnvdAccessToken string    `json:"envdAccessToken,omitempty"`
	Domain          *string   `json:"domain"`
	Lifecycle       Lifecycle `json:"lifecycle"`
}

func (s Sandbox) detail() Detail {
	d := Detail{Sandbox: s.clone(), Lifecycle: Lifecycle{AutoResume: s.AutoResume, OnTimeout: "kill"}}
	if s.AutoPause {
		d.Lifecycle.OnTimeout = "pause"
	}
	if s.Secure {
		d.EnvdAccessToken = "envd-" + s.SandboxID
	}
	return d
}

// Created is the Sandbox shape that create and connect return.
type Created struct {
	TemplateID      string  `json:"templateID"`
	SandboxID       string  `json:"sandboxID"`
	Alias           string  `json:"alias,omitempty"`
	ClientID        string  `json:"clientID"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken,omitempty"`
	Domain          *string `json:"domain"`
	// TrafficAccessToken is set for private sandboxes only.
	TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
}

func (s Sandbox) created() Created {
	c := Created{TemplateID: s.TemplateID, SandboxID: s.SandboxID, Alias: s.Alias, ClientID: s.ClientID, EnvdVersion: s.EnvdVersion}
	if s.Secure {
		c.EnvdAccessToken = "envd-" + s.SandboxID
	}
	if s.Private {
		c.TrafficAccessToken = trafficToken(s.SandboxID)
	}
	return c
}
