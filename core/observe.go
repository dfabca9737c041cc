package core

import (
	"sort"
	"time"
)

// Observer is told what the service does, for metrics (the metrics
// package implements it; core knows nothing of Prometheus). Its methods
// are called on the action's goroutine: they must be quick and never
// block. Config.Observer nil observes nothing.
type Observer interface {
	// Audited is every audit entry, as it is appended (failed appends
	// included): actions and their outcomes, retention warnings,
	// exports, deletes and blocked deletes.
	Audited(e AuditEntry)
	// DeleteStep is a delete pipeline step, journaled and about to run.
	DeleteStep(step string)
	// Exported is an export that ended (ExportVerified or ExportFailed)
	// and was recorded.
	Exported(rec ExportRecord)
}

// observer is cfg.Observer, or one that does nothing.
func (s *Service) observer() Observer {
	if o := s.cfg.Observer; o != nil {
		return o
	}
	return nopObserver{}
}

type nopObserver struct{}

func (nopObserver) Audited(AuditEntry)    {}
func (nopObserver) DeleteStep(string)     {}
func (nopObserver) Exported(ExportRecord) {}

// PausedAgeBuckets are the upper bounds of the paused-age counts in
// MetricsSnapshot: a day, a week, 30 days, 90 days; older counts last.
var PausedAgeBuckets = []time.Duration{24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour, 90 * 24 * time.Hour}

// MetricsSnapshot is the domain's state right now, summed so that no
// workspace, account or user can be told apart: per provider and state.
type MetricsSnapshot struct {
	// Workspaces counts the workspaces by provider and state.
	Workspaces map[ProviderState]int
	// StoredBytes sums the known sizes of the workspaces by provider.
	// It, ReclaimableBytes and MonthlyCost have every provider that has
	// workspaces, with 0 when nothing is known or reclaimable.
	StoredBytes map[string]int64
	// ReclaimableBytes sums, by provider, the known sizes of the paused
	// workspaces an enabled retention policy applies to (what
	// PreviewRetention would reclaim); MonthlyCost is that at the
	// accounts' storage price, where one is set.
	ReclaimableBytes map[string]int64
	MonthlyCost      map[string]float64
	// PausedAge counts paused workspaces by provider and how long they
	// have been paused: index i of the slice counts those paused at most
	// PausedAgeBuckets[i] (and more than the bucket before), the last
	// index the older ones.
	PausedAge map[string][]int
	// Accounts counts the provider accounts the reconciler knows of by
	// state (AccountFailing: backing off).
	Accounts map[AccountState]int
	// AccountLeases is how many accounts' reconciler leases this process
	// holds (PostgreSQL replicas; 0 on SQLite). LeasesTaken counts leases
	// it took since start that it did not hold before, Takeovers the
	// journal entries of another (dead) replica it resumed.
	AccountLeases, LeasesTaken, Takeovers int64
	// Shared is true when the store is shared by replicas.
	Shared bool
}

// ProviderState is a provider name and a state (a workspace's or an
// account's).
type ProviderState struct{ Provider, State string }

// MetricsSnapshot sums the workspaces and accounts the service holds in
// memory; it reads no store and calls no provider.
func (s *Service) MetricsSnapshot() MetricsSnapshot {
	out := MetricsSnapshot{
		Workspaces: map[ProviderState]int{}, StoredBytes: map[string]int64{}, ReclaimableBytes: map[string]int64{},
		MonthlyCost: map[string]float64{}, PausedAge: map[string][]int{}, Accounts: map[AccountState]int{},
		Shared: s.shared(),
	}
	now := s.now()
	_, list := s.feed.Snapshot()
	for _, ws := range list {
		if ws.Removed {
			continue
		}
		out.Workspaces[ProviderState{ws.Provider, string(ws.State)}]++
		// Every provider with workspaces has the sums, 0 included.
		out.StoredBytes[ws.Provider] += 0
		out.ReclaimableBytes[ws.Provider] += 0
		out.MonthlyCost[ws.Provider] += 0
		if ws.Size != nil {
			out.StoredBytes[ws.Provider] += ws.Size.Bytes
		}
		if ws.State == StatePaused && !ws.PausedAt.IsZero() {
			b := out.PausedAge[ws.Provider]
			if b == nil {
				b = make([]int, len(PausedAgeBuckets)+1)
				out.PausedAge[ws.Provider] = b
			}
			age := now.Sub(ws.PausedAt)
			i := sort.Search(len(PausedAgeBuckets), func(i int) bool { return age <= PausedAgeBuckets[i] })
			b[i]++
		}
		if !retentionApplies(ws) {
			continue
		}
		p, ok := s.ret.policy(ws.AccountID)
		if !ok || !p.Enabled || ws.Size == nil {
			continue
		}
		out.ReclaimableBytes[ws.Provider] += ws.Size.Bytes
		if pr := p.StoragePricePerGiBMonth; pr != nil {
			out.MonthlyCost[ws.Provider] += float64(ws.Size.Bytes) / (1 << 30) * *pr
		}
	}
	s.status.mu.Lock()
	for _, t := range s.status.m {
		out.Accounts[t.status.State]++
	}
	s.status.mu.Unlock()
	r := s.rep
	r.mu.Lock()
	out.AccountLeases = int64(len(r.leased))
	r.mu.Unlock()
	out.LeasesTaken, out.Takeovers = r.leasesTaken.Load(), r.takeovers.Load()
	return out
}
