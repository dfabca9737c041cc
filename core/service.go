package core

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Secrets is the secret store: the OS keyring on the desktop. Get of an
// unknown key returns a KindNotFound error; an unreachable store a
// KindUnavailable error whose message says what to do.
type Secrets interface {
	Set(ctx context.Context, key, value string) error
	Get(ctx context.Context, key string) (string, error)
	Delete(ctx context.Context, key string) error
}

// Config configures a Service. Store and Providers are required.
type Config struct {
	Store     Store
	Providers *Registry
	Secrets   Secrets
	Logger    *slog.Logger
	// Clock is where core reads the time and waits; nil means the system
	// clock (or Now, if set).
	Clock Clock
	// Now is a bare time source, kept for callers that only need to fix
	// the time read; Clock takes precedence.
	Now func() time.Time
	// PlanTTL is how long a delete preview's token stays valid; 0 means 10
	// minutes.
	PlanTTL time.Duration
	// ActionTimeout bounds one provider call made by an action; 0 means 2
	// minutes. An adapter that declares its own budget (Budgeter) bounds
	// its calls itself.
	ActionTimeout time.Duration
	// ActionBudget bounds one action as a whole: all its attempts and the
	// waits between them share this deadline; 0 means 5 minutes. An
	// adapter may declare a shorter one (Budgeter).
	ActionBudget time.Duration
	// AddAccountWait is how long adding an account waits for its first
	// list before answering; 0 means 3 seconds. A slower list goes on in
	// the background.
	AddAccountWait time.Duration
	// DeferLoad leaves the workspaces unread until Service.Load, so that a
	// program can start serving first: loading takes time in proportion
	// to the store. Until then, whatever needs them waits.
	DeferLoad bool
	// MaxAttempts is how often a failing step of a journaled action is
	// tried (across restarts) before the action gives up; 0 means 5.
	MaxAttempts int
	// Audit receives the audit trail; nil means the Store, if it is an
	// AuditLog, else no trail.
	Audit AuditLog
	// Exporter captures exports (StartExport); nil means exports are off.
	Exporter Exporter
	// AgentProbe asks a box's agent-server whether it is ready, for
	// Connect; nil means Connect does not wait for it.
	AgentProbe AgentProbe
	// Restorer puts an export's workspace files back into a new box of
	// any provider that reports its agent-server (RestoreFiles); nil
	// means only snapshot restores.
	Restorer FileRestorer
	// Exports keeps export records; nil means the Store, if it is an
	// ExportStore.
	Exports ExportStore
	// ScheduledDeletion lets retention policies act: delete_after is
	// computed and the retention tick deletes due workspaces. Only
	// `companion serve` sets it; on the desktop no timer deletes anything.
	ScheduledDeletion bool
	// GuardMargin is how long before a provider's deletion clock runs out
	// serve's guard exports an at-risk workspace (guard.go); 0 means
	// DefaultGuardMargin. Only with ScheduledDeletion: the desktop marks
	// such workspaces at risk instead.
	GuardMargin time.Duration
	// Retention keeps retention policies and claims; nil means the Store,
	// if it is a RetentionStore.
	Retention RetentionStore
	// OwnersExist, in serve with sign-in, says which user ids exist: a box
	// adopted on a shared account whose owner label names a removed user
	// goes to the account's owner. nil believes every label.
	OwnersExist OwnersExist
	// ExportLocation names where exports go, for delete previews; empty
	// means they only say "companion's export directory" (serve mode
	// does not show its paths).
	ExportLocation string
	// ExportBudget bounds an export (a delete's, or a person's) as a whole, every
	// attempt and wait included; 0 means 30 minutes. Attempts are not cut
	// by ActionTimeout: a large archive takes long.
	ExportBudget time.Duration
	// StepHook, when set, is called right after a delete pipeline step is
	// journaled (and before it runs). It exists for crash tests only.
	StepHook func(kind OpKind, step string)
	// FollowEvery is how often the feed reads changes other processes
	// wrote to a shared store (PostgreSQL) without being notified of
	// them, in case a notification was lost; 0 means FollowEvery.
	FollowEvery time.Duration
	// LeaseTTL is how long a lease or claim of this process outlives it
	// on a store shared by several processes (workspace leases, the
	// reconciler's account leases, journal claims); 0 means 30 seconds.
	// Live holders renew theirs every LeaseTTL/3, so a shorter TTL means
	// a faster takeover after a crash and more renewals.
	LeaseTTL time.Duration
	// Observer is told what the service does, for metrics; nil observes
	// nothing.
	Observer Observer
	// Events takes the notifications (webhooks) of what the server did
	// or is about to do; nil sends none.
	Events EventSink
}

// Service is the lifecycle service: the one place where workspaces are
// created, paused, resumed and deleted. Every action takes the workspace's
// lock, re-reads the box's real state from the provider before acting, and
// journals its steps so that a restart resumes it (see Recover).
//
// Methods take an owner: the user id in serve mode, "" on the desktop.
// A workspace or account of another owner is reported as not found.
type Service struct {
	cfg   Config
	log   *slog.Logger
	feed  *Feed
	locks locks
	// agents caches resolved agent-server endpoints (AgentTarget);
	// connected counts people's open connections to them.
	agents    agentCache
	connected connections
	// clocks are the providers' deletion clocks, as last described.
	clocks clockCache
	// guards remembers the serve guard's running and failed exports.
	guards guardState

	// bg is the context of work that outlives a request; Close cancels it.
	bg     context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	kick chan string // account ids the reconciler should visit soon
	// accountsChanged tells the reconciler to read the account list again.
	accountsChanged chan struct{}

	goneMu sync.Mutex
	gone   map[string]time.Time // account/box ids deleted recently

	status *accountStatuses // what the reconciler knows of each account

	actorsMu sync.Mutex
	actors   map[int64]string // who started each running journaled action

	ret *retention // retention policies, notices and tick state

	accountMu sync.Mutex // serialises read-modify-write of account settings

	// rep is what this process needs to share its store with other
	// replicas (nil fields on a store only one process uses).
	rep *replication
	// relaying carries the stream's transient messages to and from the
	// other replicas; nil on a store only one process uses.
	relaying *relaying
}

// NewService loads the feed from the store (unless Config.DeferLoad) and
// returns a ready service. Call Recover to resume journaled actions and RunReconciler to start the
// reconciler.
func NewService(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Providers == nil {
		return nil, fmt.Errorf("core: Config.Store and Config.Providers are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.Clock != nil:
		cfg.Now = cfg.Clock.Now
	case cfg.Now != nil:
		cfg.Clock = nowClock{cfg.Now}
	default:
		cfg.Clock = RealClock{}
		cfg.Now = cfg.Clock.Now
	}
	if cfg.PlanTTL == 0 {
		cfg.PlanTTL = 10 * time.Minute
	}
	if cfg.ActionTimeout == 0 {
		cfg.ActionTimeout = 2 * time.Minute
	}
	if cfg.ActionBudget == 0 {
		cfg.ActionBudget = 5 * time.Minute
	}
	if cfg.AddAccountWait == 0 {
		cfg.AddAccountWait = 3 * time.Second
	}
	if cfg.ExportBudget == 0 {
		cfg.ExportBudget = 30 * time.Minute
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = leaseTTL
	}
	if cfg.Audit == nil {
		cfg.Audit, _ = cfg.Store.(AuditLog)
	}
	if cfg.Retention == nil {
		cfg.Retention, _ = cfg.Store.(RetentionStore)
	}
	feed := NewLazyFeed(cfg.Store)
	if !cfg.DeferLoad {
		if err := feed.Load(ctx); err != nil {
			return nil, err
		}
	}
	bg, cancel := context.WithCancel(context.Background())
	s := &Service{
		cfg:    cfg,
		log:    cfg.Logger,
		feed:   feed,
		bg:     bg,
		cancel: cancel,
		kick:   make(chan string, 64),

		accountsChanged: make(chan struct{}, 1),
		gone:            map[string]time.Time{},
		locks:           locks{clock: cfg.Clock},
		status:          newAccountStatuses(),
		actors:          map[int64]string{},
	}
	s.rep = newReplication(cfg.Store, cfg.LeaseTTL)
	if wl, ok := cfg.Store.(WorkspaceLeases); ok {
		s.locks.shared = &sharedLocks{leases: wl, holder: s.rep.holder, ttl: cfg.LeaseTTL, sync: feed.SyncTo}
	}
	if err := s.loadFlags(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("core: load account flags: %w", err)
	}
	s.ret = newRetention(cfg.Retention)
	if err := s.ret.load(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("core: load retention policies: %w", err)
	}
	feed.derive, feed.saved, feed.prepare = s.derive, s.afterSave, s.confirmPolicy
	s.startRelay() // before Follow: its listener delivers relayed messages
	if n, ok := cfg.Store.(ChangeNotifier); ok {
		// Other processes write to this store: follow their changes.
		s.goBackground(func(ctx context.Context) { feed.Follow(ctx, n, cfg.Clock, cfg.FollowEvery, s.log) })
	}
	return s, nil
}

// Load reads the workspaces into memory, when Config.DeferLoad held them
// back; otherwise (or called again) it returns at once.
func (s *Service) Load(ctx context.Context) error {
	if err := s.feed.Load(ctx); err != nil {
		return fmt.Errorf("core: %w", err)
	}
	return nil
}

// Feed is the service's change feed.
func (s *Service) Feed() *Feed { return s.feed }

// Close stops background work and waits for running actions to reach a
// step boundary, at most until ctx ends. Unfinished actions stay journaled
// and are resumed by the next Recover.
func (s *Service) Close(ctx context.Context) error {
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("core: actions still running at shutdown: %w", ctx.Err())
	}
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// goBackground runs f on the service's background context.
func (s *Service) goBackground(f func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.bg)
	}()
}

// ProviderStatus is a provider as the front end sees it.
type ProviderStatus struct {
	Info      ProviderInfo
	Available bool
	// Reason says why the provider is unavailable and what to do.
	Reason string
}

// Providers describes every registered provider, checking reachability of
// those that can be pinged.
func (s *Service) Providers(ctx context.Context) []ProviderStatus {
	names := s.cfg.Providers.Names()
	out := make([]ProviderStatus, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = s.providerStatus(ctx, name)
		}()
	}
	wg.Wait()
	return out
}

func (s *Service) providerStatus(ctx context.Context, name string) ProviderStatus {
	st := ProviderStatus{Info: ProviderInfo{Name: name}}
	p, ok := s.cfg.Providers.Lookup(name)
	if !ok {
		st.Reason = "provider is not installed"
		return st
	}
	ctx, cancel := s.timeout(ctx, 5*time.Second)
	defer cancel()
	info, err := p.Describe(ctx)
	if err != nil {
		st.Reason = messageOf(err)
		return st
	}
	st.Info = info
	if pg, ok := p.(Pinger); ok {
		if err := pg.Ping(ctx); err != nil {
			st.Reason = messageOf(err)
			return st
		}
	}
	st.Available = true
	return st
}

// messageOf is the person-facing text of err.
func messageOf(err error) string {
	if e, ok := err.(*Error); ok && e.Message != "" {
		return e.Message
	}
	return err.Error()
}

// provider resolves an account's adapter and its description.
func (s *Service) provider(ctx context.Context, acct Account) (Provider, ProviderInfo, error) {
	p, ok := s.cfg.Providers.Lookup(acct.Provider)
	if !ok {
		return nil, ProviderInfo{}, Errorf(KindUnavailable, "provider %q is not installed", acct.Provider)
	}
	info, err := p.Describe(ctx)
	if err != nil {
		return nil, ProviderInfo{}, err
	}
	s.learnClocks(info)
	return p, info, nil
}

// callCtx bounds one provider call made by an action.
func (s *Service) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return s.timeout(ctx, s.cfg.ActionTimeout)
}

// timeout is context.WithTimeout on the service's clock: the context ends
// with context.DeadlineExceeded when the clock has moved d, or with its
// parent.
func (s *Service) timeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return withClockTimeout(ctx, s.cfg.Clock, d)
}

// Kick asks the reconciler to visit an account soon.
func (s *Service) Kick(accountID string) {
	select {
	case s.kick <- accountID:
	default:
	}
}

// noteAccountsChanged tells the reconciler that accounts were added,
// changed or removed.
func (s *Service) noteAccountsChanged() {
	select {
	case s.accountsChanged <- struct{}{}:
	default: // already pending
	}
}

func goneKey(accountID, boxID string) string { return accountID + "/" + boxID }

func (s *Service) markGone(accountID, boxID string) {
	if boxID == "" {
		return
	}
	s.goneMu.Lock()
	defer s.goneMu.Unlock()
	now := s.now()
	for k, t := range s.gone {
		if now.Sub(t) > time.Hour {
			delete(s.gone, k)
		}
	}
	s.gone[goneKey(accountID, boxID)] = now
}

func (s *Service) isGone(accountID, boxID string) bool {
	s.goneMu.Lock()
	defer s.goneMu.Unlock()
	_, ok := s.gone[goneKey(accountID, boxID)]
	return ok
}
