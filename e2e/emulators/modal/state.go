// Package modal emulates the part of Modal's gRPC control plane
// (modal.client.ModalClient) and task command router
// (modal.task_command_router.TaskCommandRouter) that the official Go SDK,
// github.com/modal-labs/modal-client/go, uses for sandboxes
// (../shared/reference/providers-wave3.md §3). It implements the generated
// server interfaces that ship in the SDK module, so the real SDK drives it
// over plaintext HTTP/2 at MODAL_SERVER_URL=http://127.0.0.1:PORT (or the
// adapter's server_url setting).
//
// It is a state machine on an injectable clock: apps, images (registry
// images and filesystem snapshots with a TTL), ephemeral secrets,
// sandboxes (running, then terminated by a call, their timeout or their
// idle timeout), tunnels and tags. Every call must carry the token id and
// secret it was made with (x-modal-token-id / x-modal-token-secret);
// wrong ones answer Unauthenticated.
//
// Each running sandbox's encrypted port is a tunnel: a listener of its own
// on 127.0.0.1 (as Modal gives each sandbox its own host), closed when the
// sandbox ends. A request through it counts as activity for the idle
// timeout, as Modal counts an open tunnel connection (providers.md §3):
// that is what tests check companion never does on a timer. Behind the
// tunnel, Options.AgentServer answers once the sandbox's
// OH_SESSION_API_KEYS_0 (from its secrets) is in X-Session-API-Key.
package modal

import (
	"net"
	"net/http"
	"sync"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
)

// Sandbox states as the emulator keeps them.
const (
	StateRunning    = "running"
	StateTerminated = "terminated"
)

// Sandbox is one sandbox as the emulator stores it.
type Sandbox struct {
	ID      string
	AppID   string
	ImageID string
	TaskID  string
	Env     map[string]string // merged from its secrets
	Tags    map[string]string
	Ports   []int
	Name    string // unique among an app's running sandboxes
	// EnableSnapshot: created with enable_snapshot (memory snapshots).
	EnableSnapshot bool
	// RestoredFrom is the sandbox whose memory snapshot this one was
	// restored from.
	RestoredFrom string
	Timeout      time.Duration
	IdleTimeout  time.Duration
	CreatedAt    time.Time
	// LastActivity is the last request through one of its tunnels (or its
	// start).
	LastActivity time.Time
	State        string
	// Result is why it ended: pb GenericResult status (TERMINATED for a
	// call, TIMEOUT, IDLE_TIMEOUT).
	Result     pb.GenericResult_GenericStatus
	FinishedAt time.Time

	tunnel *tunnel
}

// Image is one image: one a sandbox was created from (a registry tag) or a
// filesystem snapshot.
type Image struct {
	ID        string
	Tag       string // registry tag, "" for a snapshot
	Snapshot  string // the sandbox a snapshot was taken of
	CreatedAt time.Time
	// ExpiresAt is when a snapshot's TTL runs out; zero: never.
	ExpiresAt time.Time
	Deleted   bool
}

// MemorySnapshot is one memory snapshot (SandboxSnapshot): kept 7 days
// after its creation (providers.md §3).
type MemorySnapshot struct {
	ID        string
	Sandbox   string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// MemorySnapshotTTL is how long Modal keeps a memory snapshot.
const MemorySnapshotTTL = 7 * 24 * time.Hour

type tunnel struct {
	ln  net.Listener
	srv *http.Server
}

// Fault makes the next Count calls of Method (its short name,
// "SandboxCreate") fail with Code and Message; Count < 0: every call.
type Fault struct {
	Method  string
	Code    codes.Code
	Message string
	Count   int
	// RetryAfter, when set, rides on the error as Modal's RPCRetryPolicy
	// detail (retry_after_secs).
	RetryAfter time.Duration
	// Hold, when set, makes the call wait until it is closed before it
	// is answered (with the fault's error if Code != OK, else normally):
	// a test kills companion meanwhile.
	Hold chan struct{}
	// After makes a held call act first and then hold (the provider did
	// it, the answer never came).
	After bool
	// Held, when set, is closed once the call reached the hold.
	Held chan struct{}
}

type store struct {
	mu         sync.Mutex
	apps       map[string]string // name/env -> id
	images     map[string]*Image
	secrets    map[string]map[string]string
	sandboxes  map[string]*Sandbox
	memory     map[string]*MemorySnapshot
	order      []string // sandbox ids in creation order
	faults     []*Fault
	calls      map[string]int
	tunnelHit  map[string]int    // requests through each sandbox's tunnel
	routerJWT  map[string]string // issued command router tokens -> task id
	tunnelHost string            // overrides the tunnels' host when set
}
