package webhooks

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/core"
)

// Config configures Hooks. Store and Secrets are required.
type Config struct {
	Store   Store
	Secrets core.Secrets
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// HTTP sends deliveries; it must apply the address guard
	// (NewClient(wasm.PublicOnly)). nil means NewClient(nil), for
	// AllowPrivate only.
	HTTP *http.Client
	// AllowPrivate accepts webhook URLs whose host is a loopback or
	// private address (checked again at dial time by HTTP's guard).
	AllowPrivate bool
	// Blocked is the provider calls' address guard (wasm.BlockedAddr):
	// true for an address webhooks may not reach. Required unless
	// AllowPrivate.
	Blocked func(netip.Addr) bool
	// BaseURL returns the URL people reach companion at, for the links in
	// payloads (the keep link, an export's location).
	BaseURL func() string
	// MaxAttempts is how often a delivery is tried before it is marked
	// failed; 0 means 10.
	MaxAttempts int
	// RetryMin and RetryMax bound the backoff between attempts; 0 means
	// 30 seconds and 1 hour.
	RetryMin, RetryMax time.Duration
	// Lease is how long a sender holds the deliveries it claimed; 0 means
	// 1 minute. It must exceed Timeout.
	Lease time.Duration
	// Timeout bounds one attempt (connect to body read); 0 means 10 s.
	Timeout time.Duration
	// Poll is how often the sender looks for due deliveries written by
	// other replicas or waiting for their backoff; 0 means 1 s.
	Poll time.Duration
	// Parallel is how many attempts one sender makes at once; 0 means 4.
	Parallel int
	// Observer is told each attempt's outcome, for metrics; nil: none.
	Observer Observer
}

// Observer is told what the sender does. Labels are bounded: event
// kinds and outcomes (delivered, retry, failed).
type Observer interface {
	WebhookAttempt(event, outcome string)
}

// Hooks is the webhooks service: the routes' operations, the event sink
// core emits to, the sender, and the keep links.
type Hooks struct {
	cfg     Config
	log     *slog.Logger
	backoff Backoff
	holder  string
	kick    chan struct{}

	svcMu sync.RWMutex
	svc   *core.Service

	// rotMu orders this process's rotations and its senders' clean-up of
	// expired previous secrets, so neither undoes the other.
	rotMu sync.Mutex
}

// New returns the webhooks service.
func New(cfg Config) (*Hooks, error) {
	if cfg.Store == nil || cfg.Secrets == nil {
		return nil, fmt.Errorf("webhooks: Config.Store and Config.Secrets are required")
	}
	if cfg.Blocked == nil && !cfg.AllowPrivate {
		return nil, fmt.Errorf("webhooks: Config.Blocked (the address guard) is required unless private addresses are allowed")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTP == nil {
		cfg.HTTP = NewClient(nil)
	}
	if cfg.BaseURL == nil {
		cfg.BaseURL = func() string { return "" }
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 30 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = time.Hour
	}
	cfg.RetryMax = max(cfg.RetryMax, cfg.RetryMin)
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Minute
	}
	if cfg.Lease <= cfg.Timeout {
		return nil, fmt.Errorf("webhooks: the lease (%s) must exceed an attempt's timeout (%s)", cfg.Lease, cfg.Timeout)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 4
	}
	return &Hooks{cfg: cfg, log: cfg.Logger, backoff: Backoff{Min: cfg.RetryMin, Max: cfg.RetryMax},
		holder: core.NewID("wh"), kick: make(chan struct{}, 1)}, nil
}

// Attach gives the hooks the service whose accounts scope them and whose
// workspaces the keep links keep. It is set once the service exists (the
// service takes the hooks as its event sink).
func (h *Hooks) Attach(svc *core.Service) {
	h.svcMu.Lock()
	h.svc = svc
	h.svcMu.Unlock()
}

func (h *Hooks) service() (*core.Service, error) {
	h.svcMu.RLock()
	defer h.svcMu.RUnlock()
	if h.svc == nil {
		return nil, core.Errorf(core.KindUnavailable, "companion is starting; try again")
	}
	return h.svc, nil
}

// SecretKey is where a hook's signing secret is in the secret store.
func SecretKey(id string) string { return "webhook/" + id }

// CreateRequest asks for a new webhook.
type CreateRequest struct {
	URL    string
	Events []string
	// AccountID limits it to one account the owner may see; "" is every
	// one of the owner's workspaces and accounts.
	AccountID string
}

// maxHooks bounds one owner's webhooks: each event costs a delivery per
// hook.
const maxHooks = 20

// Create registers a webhook for owner and returns it with its signing
// secret, which is shown this once.
func (h *Hooks) Create(ctx context.Context, owner string, req CreateRequest) (Hook, string, error) {
	u, err := h.CheckURL(req.URL)
	if err != nil {
		return Hook{}, "", err
	}
	events, err := checkEvents(req.Events)
	if err != nil {
		return Hook{}, "", err
	}
	if req.AccountID != "" {
		svc, err := h.service()
		if err != nil {
			return Hook{}, "", err
		}
		if _, err := svc.Account(ctx, owner, req.AccountID); err != nil {
			return Hook{}, "", err
		}
	}
	have, err := h.cfg.Store.Webhooks(ctx, owner)
	if err != nil {
		return Hook{}, "", err
	}
	if len(have) >= maxHooks {
		return Hook{}, "", core.Errorf(core.KindConflict, "you have %d webhooks, the most allowed; delete one first", len(have))
	}
	hook := Hook{ID: core.NewID("wh"), Owner: owner, AccountID: req.AccountID, URL: u, Events: events, CreatedAt: h.cfg.Now().UTC()}
	secret := newSecret()
	// The secret is stored first: a hook without its secret could not
	// sign, while a secret without its hook is only an unused entry.
	if err := h.cfg.Secrets.Set(ctx, SecretKey(hook.ID), secret); err != nil {
		return Hook{}, "", fmt.Errorf("store the webhook's signing secret: %w", err)
	}
	if err := h.cfg.Store.PutWebhook(ctx, hook); err != nil {
		h.cfg.Secrets.Delete(context.WithoutCancel(ctx), SecretKey(hook.ID))
		return Hook{}, "", err
	}
	return hook, secret, nil
}

// List returns owner's webhooks. A previous secret whose grace period
// is over is not shown, though it may not have been dropped yet.
func (h *Hooks) List(ctx context.Context, owner string) ([]Hook, error) {
	list, err := h.cfg.Store.Webhooks(ctx, owner)
	if err != nil {
		return nil, err
	}
	now := h.cfg.Now()
	for i := range list {
		if !now.Before(list[i].PreviousSecretUntil) {
			list[i].PreviousSecretUntil = time.Time{}
		}
	}
	return list, nil
}

// Get returns one of owner's webhooks; another owner's is not found.
func (h *Hooks) Get(ctx context.Context, owner, id string) (Hook, error) {
	hook, err := h.cfg.Store.Webhook(ctx, id)
	if err != nil {
		return Hook{}, err
	}
	if hook.Owner != owner {
		return Hook{}, core.Errorf(core.KindNotFound, "webhook %q not found", id)
	}
	return hook, nil
}

// Delete removes one of owner's webhooks, its deliveries and its
// secrets (the current one and a rotation's previous one).
func (h *Hooks) Delete(ctx context.Context, owner, id string) error {
	if _, err := h.Get(ctx, owner, id); err != nil {
		return err
	}
	if err := h.cfg.Store.DeleteWebhook(ctx, id); err != nil {
		return err
	}
	for _, key := range []string{SecretKey(id), PreviousSecretKey(id)} {
		if err := h.cfg.Secrets.Delete(ctx, key); err != nil && !core.IsKind(err, core.KindNotFound) {
			h.log.Warn("could not remove a deleted webhook's secret", "webhook", id, "err", err)
		}
	}
	return nil
}

// Deliveries returns the newest deliveries of one of owner's webhooks.
func (h *Hooks) Deliveries(ctx context.Context, owner, id string, limit int) ([]Delivery, error) {
	if _, err := h.Get(ctx, owner, id); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	return h.cfg.Store.Deliveries(ctx, id, limit)
}

func checkEvents(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, core.Errorf(core.KindInvalid, "events is required: one or more of %s", strings.Join(core.EventKinds, ", "))
	}
	var out []string
	for _, e := range in {
		if !slices.Contains(core.EventKinds, e) {
			return nil, core.Errorf(core.KindInvalid, "unknown event %q: want one or more of %s", e, strings.Join(core.EventKinds, ", "))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// maxURLLen bounds a webhook URL.
const maxURLLen = 2048

// CheckURL validates a webhook URL: absolute http(s), no credentials in
// it, and unless private addresses are allowed, no loopback or private
// address literal or localhost name (names that resolve to one are refused
// when dialed). It returns the URL as stored.
func (h *Hooks) CheckURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > maxURLLen {
		return "", core.Errorf(core.KindInvalid, "url is required: an http(s) URL of at most %d characters", maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Hostname() == "" {
		return "", core.Errorf(core.KindInvalid, "url %q is not an absolute http or https URL", raw)
	}
	if u.User != nil {
		return "", core.Errorf(core.KindInvalid, "url must not carry a user name or password; the signature authenticates companion")
	}
	if u.Fragment != "" {
		return "", core.Errorf(core.KindInvalid, "url must not have a fragment (#...)")
	}
	if !h.cfg.AllowPrivate {
		host := strings.ToLower(u.Hostname())
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return "", core.Errorf(core.KindInvalid, "url %q names this machine; webhooks go to public addresses only (an operator may allow private ones with --webhooks-allow-private)", raw)
		}
		if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && h.cfg.Blocked(ip) {
			return "", core.Errorf(core.KindInvalid, "url %q is a loopback, private or otherwise non-public address; webhooks go to public addresses only (an operator may allow private ones with --webhooks-allow-private)", raw)
		}
	}
	return u.String(), nil
}
