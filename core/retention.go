package core

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"
)

// RetentionPolicy is one account's scheduled deletion: delete its boxes
// that stayed paused for PausedFor. Only `companion serve` acts on it
// (Config.ScheduledDeletion); an account without a stored policy has it
// off.
type RetentionPolicy struct {
	AccountID string
	Enabled   bool
	// PausedFor is how long a box must stay paused (PausedForRetention)
	// before it is deleted.
	PausedFor time.Duration
	// WarnBefore is how long before its delete a workspace's owner gets a
	// retention_warning notice on the stream.
	WarnBefore time.Duration
	// StoragePricePerGiBMonth, when set, is what a GiB of box storage costs
	// the account per month, for the dry run's money figure.
	StoragePricePerGiBMonth *float64
	// ExportsKeptFor, when above zero, is how long the account's exports
	// are kept: older ones lose their files (export_expiry.go), whether or
	// not Enabled schedules deletes.
	ExportsKeptFor time.Duration
	UpdatedAt      time.Time
}

// DefaultRetentionWarning is the warning window of a policy that names
// none.
const DefaultRetentionWarning = 24 * time.Hour

// maxRetentionDuration bounds every policy duration (about ten years).
const maxRetentionDuration = 10 * 365 * 24 * time.Hour

// validate checks a policy a person proposed.
func (p RetentionPolicy) validate() error {
	if p.PausedFor < 0 || p.PausedFor > maxRetentionDuration {
		return Errorf(KindInvalid, "paused_for_seconds must be between 1 and %d seconds, not %d", int64(maxRetentionDuration/time.Second), int64(p.PausedFor/time.Second))
	}
	if p.Enabled && p.PausedFor < time.Second {
		return Errorf(KindInvalid, "paused_for_seconds is required when the policy is enabled: how long a box stays paused before it is deleted (at least 1)")
	}
	if p.WarnBefore < 0 || p.WarnBefore > maxRetentionDuration {
		return Errorf(KindInvalid, "warn_before_seconds must be between 0 and %d seconds, not %d", int64(maxRetentionDuration/time.Second), int64(p.WarnBefore/time.Second))
	}
	if p.ExportsKeptFor < 0 || p.ExportsKeptFor > maxRetentionDuration {
		return Errorf(KindInvalid, "exports_kept_for_seconds must be between 0 (for ever) and %d seconds, not %d", int64(maxRetentionDuration/time.Second), int64(p.ExportsKeptFor/time.Second))
	}
	if pr := p.StoragePricePerGiBMonth; pr != nil && (math.IsNaN(*pr) || math.IsInf(*pr, 0) || *pr < 0 || *pr > 1e9) {
		return Errorf(KindInvalid, "storage_price_per_gib_month must be a number between 0 and 1e9 (or null for none)")
	}
	return nil
}

// RetentionStore keeps policies, the claims that make each scheduled
// delete run once, and which warnings were sent. db implements it.
type RetentionStore interface {
	PutRetentionPolicy(ctx context.Context, p RetentionPolicy) error
	RetentionPolicies(ctx context.Context) ([]RetentionPolicy, error)
	// RetentionPolicy returns one account's stored policy; ok is false
	// when it has none.
	RetentionPolicy(ctx context.Context, accountID string) (p RetentionPolicy, ok bool, err error)
	// RetentionDue returns the live workspaces of account whose
	// delete_after is at or before now and whose claim (if any) may be
	// taken at now, soonest first, at most limit of them.
	RetentionDue(ctx context.Context, accountID string, now time.Time, limit int) ([]RetentionCandidate, error)
	// RetentionUnwarned returns the live workspaces of account whose
	// delete_after is at or before until and who were not warned about
	// that delete_after, soonest first, at most limit.
	RetentionUnwarned(ctx context.Context, accountID string, until time.Time, limit int) ([]RetentionCandidate, error)
	// MarkRetentionWarned records that a workspace was warned about its
	// delete at deleteAfter.
	MarkRetentionWarned(ctx context.Context, workspaceID string, deleteAfter time.Time) error
	// ClaimRetention takes a workspace's claim for holder, atomically, if
	// nobody else holds an unexpired lease on it and its backoff is over.
	// ok is false when it could not be taken.
	ClaimRetention(ctx context.Context, workspaceID, holder string, now time.Time, lease time.Duration) (c RetentionClaim, ok bool, err error)
	// SaveRetentionClaim writes c if asHolder (who took the claim) still
	// holds it; c.Holder may be "" to release it. A claim held by someone
	// else is a KindConflict error.
	SaveRetentionClaim(ctx context.Context, asHolder string, c RetentionClaim) error
	// DropRetentionClaim forgets a workspace's claim and its backoff.
	DropRetentionClaim(ctx context.Context, workspaceID string) error
	// SweepRetention forgets claims of workspaces that are gone or no
	// longer scheduled (and not being deleted), and the warnings whose
	// delete_after no longer stands among the next warnLimit after
	// warnAfter (by workspace id). It returns where the next sweep goes on
	// from ("" to start over), so each sweep costs a bounded slice.
	SweepRetention(ctx context.Context, warnAfter string, warnLimit int) (next string, err error)
}

// RetentionCandidate is a scheduled workspace as the index finds it.
type RetentionCandidate struct {
	WorkspaceID string
	AccountID   string
	DeleteAfter time.Time
}

// RetentionClaim is one workspace's claim. Holder and LeaseUntil make a
// scheduled delete run in one process only; Attempts, Launched and
// NotBefore carry the backoff of deletes that did not remove the
// workspace.
type RetentionClaim struct {
	WorkspaceID string
	Holder      string
	LeaseUntil  time.Time
	// Attempts is how many deletes were started under this claim.
	Attempts int
	// Launched says a delete was started and its outcome not yet seen.
	Launched bool
	// NotBefore is when the claim may next be taken (the backoff).
	NotBefore time.Time
	LastError string
}

// Notice is a stream message about one workspace that is not a change of
// the workspace itself, such as a retention warning.
type Notice struct {
	Kind        string
	Owner       string
	WorkspaceID string
	DeleteAfter time.Time
}

// NoticeRetentionWarning: the workspace entered its policy's warning
// window and is deleted at DeleteAfter unless it is resumed or kept.
const NoticeRetentionWarning = "retention_warning"

// Audit actions of retention.
const (
	AuditRetentionPolicy   = "retention_policy"
	AuditRetentionSchedule = "retention_schedule"
	AuditRetentionWarn     = "retention_warn"
	AuditRetentionSkip     = "retention_skip"
	AuditRetentionBackoff  = "retention_backoff"
)

// retention is the service's retention state: the policies (read on every
// workspace save, so kept in memory), the notice subscribers and what the
// tick has done.
type retention struct {
	store  RetentionStore // nil: retention unavailable
	holder string         // this process's claim holder id

	mu       sync.RWMutex
	policies map[string]RetentionPolicy
	// reloadMu orders the writes of policies to the store and their
	// re-reads from it (replicas.go), so that a slow re-read never puts
	// an older policy back in memory over a newer one.
	reloadMu sync.Mutex

	// waiting are the workspaces whose schedule is derived again once this
	// process's action on them releases their lock (rederiveAfter).
	waitMu  sync.Mutex
	waiting map[string]struct{}
	// redo are accounts whose policy changed in memory but whose
	// workspaces could not all be derived again: the next tick does it.
	redo map[string]struct{}

	subsMu sync.Mutex
	subs   map[chan Notice]struct{}

	sweepFrom string // where the next sweep of warnings goes on (tick only)

	statMu   sync.Mutex
	ticks    int64
	lastTick time.Time
	interval time.Duration
}

func newRetention(store RetentionStore) *retention {
	return &retention{store: store, holder: NewID("rh"), policies: map[string]RetentionPolicy{}, subs: map[chan Notice]struct{}{},
		waiting: map[string]struct{}{}, redo: map[string]struct{}{}}
}

func (r *retention) load(ctx context.Context) error {
	if r.store == nil {
		return nil
	}
	list, err := r.store.RetentionPolicies(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range list {
		r.policies[p.AccountID] = p
	}
	return nil
}

func (r *retention) policy(accountID string) (RetentionPolicy, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.policies[accountID]
	return p, ok
}

func (r *retention) enabled() []RetentionPolicy {
	return r.where(func(p RetentionPolicy) bool { return p.Enabled })
}

// where returns the policies keep accepts, by account id.
func (r *retention) where(keep func(RetentionPolicy) bool) []RetentionPolicy {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []RetentionPolicy
	for _, p := range r.policies {
		if keep(p) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AccountID < out[j].AccountID })
	return out
}

// retentionApplies reports whether a policy would delete ws at all: a box
// really paused (not crashed or exited) since a known time, not kept.
func retentionApplies(ws Workspace) bool {
	return !ws.Removed && !ws.Keep && ws.PausedForRetention() && !ws.PausedAt.IsZero()
}

// deriveRetention sets ws.DeleteAfter from its account's policy; the feed
// calls it on every save, so delete_after follows every change of state,
// keep or policy without a pass over all workspaces. On the desktop
// nothing is scheduled: no timer would act on it.
func (s *Service) deriveRetention(ws Workspace) Workspace {
	ws.DeleteAfter = time.Time{}
	if !s.cfg.ScheduledDeletion || !retentionApplies(ws) {
		return ws
	}
	if p, ok := s.ret.policy(ws.AccountID); ok && p.Enabled {
		ws.DeleteAfter = ws.PausedAt.Add(p.PausedFor).UTC()
	}
	return ws
}

// retentionSaved audits a change of a workspace's schedule; the feed calls
// it after each save that changed delete_after.
func (s *Service) retentionSaved(before, after Workspace) {
	if before.DeleteAfter.Equal(after.DeleteAfter) || after.Removed || after.State == StateDeleting {
		return
	}
	outcome := "scheduled: deleted after " + after.DeleteAfter.Format(time.RFC3339)
	if after.DeleteAfter.IsZero() {
		outcome = "cleared: " + s.unscheduledReason(after)
	}
	s.audit(s.bg, AuditEntry{Owner: after.Owner, Actor: ActorRetention, Action: AuditRetentionSchedule,
		WorkspaceID: after.ID, AccountID: after.AccountID, Provider: after.Provider, Outcome: outcome})
}

func (s *Service) unscheduledReason(ws Workspace) string {
	switch {
	case !s.cfg.ScheduledDeletion:
		return "scheduled deletion runs only in companion serve"
	case ws.Keep:
		return "the workspace is kept"
	case !ws.PausedForRetention():
		return "the workspace is " + string(ws.State)
	}
	if p, ok := s.ret.policy(ws.AccountID); !ok || !p.Enabled {
		return "the account's retention policy is off"
	}
	return "no paused time is known"
}

// RetentionPolicyOf returns an account's policy (off, with the default
// warning window, when none was set).
func (s *Service) RetentionPolicyOf(ctx context.Context, owner, accountID string) (RetentionPolicy, error) {
	if _, err := s.Account(ctx, owner, accountID); err != nil {
		return RetentionPolicy{}, err
	}
	if p, ok := s.ret.policy(accountID); ok {
		return p, nil
	}
	return RetentionPolicy{AccountID: accountID, WarnBefore: DefaultRetentionWarning}, nil
}

// SetRetentionPolicy stores an account's policy, audits it as an account
// change and recomputes delete_after on the account's workspaces.
func (s *Service) SetRetentionPolicy(ctx context.Context, owner string, p RetentionPolicy) (RetentionPolicy, error) {
	if s.ret.store == nil {
		return RetentionPolicy{}, Errorf(KindUnavailable, "this store cannot keep retention policies")
	}
	acct, err := s.Account(ctx, owner, p.AccountID)
	if err != nil {
		return RetentionPolicy{}, err
	}
	if err := p.validate(); err != nil {
		return RetentionPolicy{}, err
	}
	p.UpdatedAt = s.now()
	s.ret.reloadMu.Lock()
	if err := s.ret.store.PutRetentionPolicy(ctx, p); err != nil {
		s.ret.reloadMu.Unlock()
		return RetentionPolicy{}, err
	}
	s.ret.mu.Lock()
	s.ret.policies[p.AccountID] = p
	s.ret.mu.Unlock()
	s.ret.reloadMu.Unlock()
	// The other replicas read it from the store and derive again at once,
	// rather than at their next tick (replicas.go, policyAnnounced).
	s.relay(Relayed{Kind: RelayPolicy, AccountID: p.AccountID})
	s.audit(ctx, AuditEntry{Owner: acct.Owner, Actor: ActorOf(ctx, ActorRetention), Action: AuditRetentionPolicy,
		AccountID: acct.ID, Provider: acct.Provider, Outcome: "ok: " + describePolicy(p)})
	if err := s.rederiveAccount(ctx, acct.ID); err != nil {
		return p, fmt.Errorf("the policy was saved, but delete_after could not be updated on every workspace (it is on the next start): %w", err)
	}
	return p, nil
}

func describePolicy(p RetentionPolicy) string {
	if !p.Enabled {
		return "retention off"
	}
	s := fmt.Sprintf("delete boxes paused for %s, warn %s before", p.PausedFor, p.WarnBefore)
	if p.StoragePricePerGiBMonth != nil {
		s += fmt.Sprintf(", storage %g per GiB-month", *p.StoragePricePerGiBMonth)
	}
	return s
}

// RetentionPreview is what a proposed policy would do to an account now.
type RetentionPreview struct {
	Policy RetentionPolicy
	// Workspaces it would delete, soonest first.
	Workspaces []RetentionPreviewItem
	// ReclaimBytes sums the sizes known; UnknownSizes counts the
	// workspaces without one.
	ReclaimBytes int64
	UnknownSizes int
	// MonthlySavings is ReclaimBytes at the account's storage price, when
	// the proposal or the stored policy has one.
	MonthlySavings *float64
	// ScheduledDeletion is false on the desktop, where nothing is deleted
	// on a timer whatever the policy says.
	ScheduledDeletion bool
	// Exports is what the policy's export retention would remove now.
	Exports ExportsPreview
	// Notes say, in words, what the policy cannot do on this account:
	// at a provider that cannot pause (Cloudflare) it never deletes a
	// workspace, and the provider's own clock wipes the files instead.
	Notes []string
}

// RetentionPreviewItem is one workspace a policy would delete.
type RetentionPreviewItem struct {
	Workspace Workspace
	// DeleteAt is when the policy makes it due; for one already past due,
	// DeleteAt is now (the first tick after enabling deletes it).
	DeleteAt time.Time
}

// PreviewRetention answers what the proposed policy p would delete on its
// account, when, and what it would reclaim. It reads only companion's
// records: no box is woken or asked for its size.
func (s *Service) PreviewRetention(ctx context.Context, owner string, p RetentionPolicy) (RetentionPreview, error) {
	if _, err := s.Account(ctx, owner, p.AccountID); err != nil {
		return RetentionPreview{}, err
	}
	if err := p.validate(); err != nil {
		return RetentionPreview{}, err
	}
	if p.StoragePricePerGiBMonth == nil {
		if cur, ok := s.ret.policy(p.AccountID); ok {
			p.StoragePricePerGiBMonth = cur.StoragePricePerGiBMonth
		}
	}
	now := s.now()
	xp, err := s.previewExports(ctx, owner, p, now)
	if err != nil {
		return RetentionPreview{}, err
	}
	out := RetentionPreview{Policy: p, Workspaces: []RetentionPreviewItem{}, ScheduledDeletion: s.cfg.ScheduledDeletion, Exports: xp}
	if acct, err := s.Account(ctx, owner, p.AccountID); err == nil {
		if _, info, err := s.provider(ctx, acct); err == nil {
			out.Notes = retentionNotes(info)
		}
	}
	if !p.Enabled {
		return out, nil
	}
	for _, ws := range s.feed.OfAccount(p.AccountID) {
		if ws.Owner != owner || !retentionApplies(ws) {
			continue
		}
		at := ws.PausedAt.Add(p.PausedFor).UTC()
		if at.Before(now) {
			at = now
		}
		out.Workspaces = append(out.Workspaces, RetentionPreviewItem{Workspace: ws, DeleteAt: at})
		if ws.Size != nil {
			out.ReclaimBytes += ws.Size.Bytes
		} else {
			out.UnknownSizes++
		}
	}
	sort.Slice(out.Workspaces, func(i, j int) bool {
		a, b := out.Workspaces[i], out.Workspaces[j]
		if !a.DeleteAt.Equal(b.DeleteAt) {
			return a.DeleteAt.Before(b.DeleteAt)
		}
		return a.Workspace.ID < b.Workspace.ID
	})
	if pr := p.StoragePricePerGiBMonth; pr != nil {
		m := float64(out.ReclaimBytes) / (1 << 30) * *pr
		out.MonthlySavings = &m
	}
	return out, nil
}

// SubscribeNotices delivers every Notice; a subscriber that falls behind
// by buffer notices misses some (the workspace's delete_after stays
// authoritative). Call the returned function to stop.
func (s *Service) SubscribeNotices(buffer int) (<-chan Notice, func()) {
	ch := make(chan Notice, buffer)
	r := s.ret
	r.subsMu.Lock()
	r.subs[ch] = struct{}{}
	r.subsMu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			r.subsMu.Lock()
			delete(r.subs, ch)
			r.subsMu.Unlock()
		})
	}
}

func (r *retention) publish(n Notice) {
	r.subsMu.Lock()
	defer r.subsMu.Unlock()
	for ch := range r.subs {
		select {
		case ch <- n:
		default:
		}
	}
}

// RetentionStatus is what the scheduler has done since start.
type RetentionStatus struct {
	// ScheduledDeletion is true only in serve mode.
	ScheduledDeletion bool
	Interval          time.Duration
	Ticks             int64
	LastTickAt        time.Time
}

// RetentionStatus reports the scheduler's state.
func (s *Service) RetentionStatus() RetentionStatus {
	r := s.ret
	r.statMu.Lock()
	defer r.statMu.Unlock()
	return RetentionStatus{ScheduledDeletion: s.cfg.ScheduledDeletion, Interval: r.interval, Ticks: r.ticks, LastTickAt: r.lastTick}
}

// retentionNotes words what a retention policy cannot do at a provider:
// one that cannot pause never has a paused workspace to delete, and a
// clock of its own that wipes files is what loses the work there.
func retentionNotes(info ProviderInfo) []string {
	if info.Capabilities.Suspend {
		return nil
	}
	note := fmt.Sprintf("%s cannot pause, so this policy (it deletes workspaces paused for too long) never deletes a workspace of this account", info.Name)
	for _, c := range info.Clocks {
		if c.Loses == ClockLosesFiles {
			note += fmt.Sprintf("; %s's own %s does, with nothing kept: export a workspace to keep its work", info.Name, describeClock(c))
			break
		}
	}
	return []string{note}
}
