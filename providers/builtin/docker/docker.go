// Package docker is companion's built-in provider for the local Docker
// Engine, spoken to through its own small API client (internal/engine) with
// the API version negotiated on first use (Engine 20.10 / API 1.41 and newer).
//
// A box is one container, labelled companion.box=1 and companion.scope=<Scope>
// plus core.LabelWorkspace, named companion-<workspace id> so that creating
// twice for one workspace finds the first container instead of making a
// second. The container runs the agent-server image with:
//
//   - port 8000 published on 127.0.0.1 at a port the engine picks (re-read on
//     every inspect: it can change when the box is started again);
//   - a volume of its own at /workspace, labelled like the container. The
//     engine creates it with the container and removes it with the container
//     (an anonymous volume), so no crash between two steps can leave a volume
//     without its box or a box without its volume;
//   - a fresh random session key in OH_SESSION_API_KEYS_0. companion never
//     stores it: Get and List read it back from the container's environment.
//
// Suspend stops the container (files kept, memory lost, same id); Resume
// starts it (or unfreezes one paused with `docker pause`); Delete stops it
// gracefully, then removes it with its volume. A stopped box and a box that
// was created but never started are both reported paused.
//
// Size is the container's writable layer plus its volume, from one
// /system/df call per List or Get. Last activity comes from the
// agent-server's GET /server_info (idle_time), which does not reset the
// box's idle clock; it is asked only while the box runs, never for a
// stopped one.
//
// The image (Config.Image, DefaultImage when unset, or a create's "image"
// option) is pulled when the engine lacks it: one pull per image, shared
// by everyone waiting, reported in the log and through
// core.CreateSpec.Progress. Ping includes the default image, so a provider
// whose image cannot be had is unavailable, with the reason and the fix.
// Every Engine call has a deadline of its own (see the constants below).
//
// Scope separates companions (or test runs) sharing one engine: a provider
// lists and touches only containers of its own scope.
//
// Creation options (core.CreateSpec.Options):
//
//	image   the agent-server image for this box, instead of Config.Image
package docker

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker/internal/engine"
)

// Labels and names companion puts on what it creates.
const (
	// LabelBox marks a container (and its volume) as a companion box.
	LabelBox = "companion.box"
	// LabelScope holds the Config.Scope that made the box.
	LabelScope = "companion.scope"
	// LabelName holds the workspace name given at creation, so an adopted
	// box keeps a readable name.
	LabelName = "companion.name"
	// OptionImage is the creation option that overrides Config.Image.
	OptionImage = "image"
	// DefaultScope is the scope when Config.Scope is empty.
	DefaultScope = "default"
	// Version is the adapter's version, reported by Describe.
	Version = "1.0.0"

	namePrefix   = "companion-"
	keyEnv       = "OH_SESSION_API_KEYS_0"
	workspaceDir = "/workspace"
	agentPort    = "8000/tcp"
)

// Config configures a Provider.
type Config struct {
	// Observe, when set, is told about every call of the six box methods
	// once it returned: the operation ("list", "get", "create",
	// "suspend", "resume", "delete"), how long it took and its error
	// (metrics). It must be quick.
	Observe func(op string, d time.Duration, err error)
	// Image is the default agent-server image of new boxes; DefaultImage
	// when empty. Missing at the engine, it is pulled.
	Image string
	// ImageFlag is how people choose another image, named in the advice
	// when the image cannot be pulled; "--docker-image" when empty.
	ImageFlag string
	// Scope keeps this provider to its own boxes on a shared engine;
	// DefaultScope when empty.
	Scope string
	// Host overrides DOCKER_HOST (e.g. unix:///var/run/docker.sock or
	// tcp://127.0.0.1:2375); other DOCKER_* variables still apply.
	Host string
	// StopTimeout is how long Suspend and Delete wait for the agent-server
	// to exit after SIGTERM before the engine kills it; 10s when zero.
	StopTimeout time.Duration
	// ProbeTimeout bounds one GET /server_info; 2s when zero.
	ProbeTimeout time.Duration
	Logger       *slog.Logger
	// Now is the clock for size and activity timestamps; time.Now if nil.
	Now func() time.Time
}

// Provider is the docker adapter. It implements core.Provider and
// core.Pinger, and is safe for concurrent use.
type Provider struct {
	cfg   Config
	log   *slog.Logger
	cli   *engine.Client
	host  string
	setup error // why the client could not be made; every call returns it
	probe *http.Client

	duMu  sync.Mutex
	duCur *duFlight

	bg     context.Context // ends at Close: stops pulls
	stopBg context.CancelFunc
	pullMu sync.Mutex
	pulls  map[string]*pull

	stops stopCache // why each exited container stopped, once known
}

// Deadlines of Engine calls, by what they do: an Engine that accepts the
// connection and never answers must turn into "unavailable" within
// seconds, not hang an action or a request.
const (
	pingTimeout   = 3 * time.Second
	metaTimeout   = 10 * time.Second // inspect, list, unpause, image inspect
	dfTimeout     = 15 * time.Second // /system/df walks every layer and volume
	createTimeout = 30 * time.Second
	startTimeout  = 30 * time.Second
	removeTimeout = 60 * time.Second
	// Stopping waits Config.StopTimeout for the agent-server, then the
	// engine kills it; stopSlack is the engine's time on top of that.
	stopSlack = 20 * time.Second
)

var (
	_ core.Provider      = (*Provider)(nil)
	_ core.Pinger        = (*Provider)(nil)
	_ core.CreateChecker = (*Provider)(nil)
)

// New returns a provider for the engine at cfg.Host (else DOCKER_HOST, else
// the platform default). It does not contact the engine: an unreachable
// engine is reported by Ping and by each call as a core.KindUnavailable
// error, and so is an unusable host address. New fails only when
// cfg.Image is empty.
func New(cfg Config) (*Provider, error) {
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.ImageFlag == "" {
		cfg.ImageFlag = "--docker-image"
	}
	if cfg.Scope == "" {
		cfg.Scope = DefaultScope
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	bg, stopBg := context.WithCancel(context.Background())
	p := &Provider{
		bg:     bg,
		stopBg: stopBg,
		cfg:    cfg,
		log:    cfg.Logger.With("provider", "docker"),
		probe: &http.Client{
			Timeout:   cfg.ProbeTimeout,
			Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second},
		},
	}
	cli, err := engine.New(cfg.Host)
	if err != nil {
		p.host = engine.ResolveHost(cfg.Host)
		p.setup = &core.Error{
			Kind:    core.KindUnavailable,
			Message: "Docker Engine address " + p.host + " is not usable (" + err.Error() + "): set DOCKER_HOST to e.g. unix:///var/run/docker.sock (and DOCKER_CERT_PATH, DOCKER_API_VERSION only if needed)",
			Err:     err,
		}
		p.log.Warn("docker provider unavailable", "err", p.setup)
		return p, nil
	}
	p.cli = cli
	p.host = cli.Host()
	return p, nil
}

// Close releases the engine connection.
func (p *Provider) Close() error {
	p.stopBg()
	if p.cli == nil {
		return nil
	}
	return p.cli.Close()
}

// Describe reports what the adapter can do. It does not contact the engine.
func (p *Provider) Describe(ctx context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{
		Name:    "docker",
		Version: Version,
		Kind:    "builtin",
		Description: "Boxes are containers on the local Docker Engine (" + p.host + "), image " + p.cfg.Image +
			". Pausing stops the container: files in /workspace and the container are kept, memory is not.",
		Capabilities: core.Capabilities{
			List:               true,
			LastActivity:       true,
			Suspend:            true,
			SuspendKeepsFiles:  true,
			SuspendKeepsMemory: false,
			ResumeSameIdentity: true,
			Delete:             true,
			NativeIdlePause:    false,
			NativePausedTTL:    false,
		},
		Credentials: []core.CredentialSpec{},
		Config:      []core.ConfigField{},
		// No deletion clocks: the engine removes a container only when
		// asked (companion never sets HostConfig.AutoRemove, --rm), so a
		// stopped box and its volume stay until companion deletes them.
		Clocks: []core.DeletionClock{},
		Options: []core.ConfigField{{Name: OptionImage,
			Description: "agent-server image for this box instead of " + p.cfg.Image + "; it must serve the agent-server API on port 8000",
			Example:     DefaultImage}},
	}, nil
}

// Ping checks that the engine answers and that the default image is
// there or can be pulled. A missing image starts a pull: Ping waits a few
// seconds for its verdict and, if it is still running, reports the
// provider available (a create waits for the pull).
func (p *Provider) Ping(ctx context.Context) error {
	if err := p.pingEngine(ctx); err != nil {
		return err
	}
	return p.checkDefaultImage(ctx)
}

func (p *Provider) pingEngine(ctx context.Context) error {
	if p.setup != nil {
		return p.setup
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	_, err := p.cli.Ping(ctx)
	err = p.wrap(err, "ping", "")
	if core.IsKind(err, core.KindInvalid) {
		// The only invalid answer to a ping is an API version this client
		// cannot speak: the engine is there but unusable.
		return &core.Error{Kind: core.KindUnavailable, Message: "Docker Engine at " + p.host + " cannot be used: " + err.Error() + "; upgrade Docker", Err: err}
	}
	return err
}
