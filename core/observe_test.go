package core_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// MetricsSnapshot sums the workspaces held in memory: by provider and
// state, their sizes, what enabled retention will reclaim and its price,
// and how long the paused ones have been paused.
func TestMetricsSnapshot(t *testing.T) {
	e := newRetEnv(t, true)
	const gib = 1 << 30
	e.paused("young", 2*time.Hour, gib)
	e.paused("old", 10*24*time.Hour, 2*gib)
	price := 0.5
	s := e.svc.MetricsSnapshot()
	if got := s.Workspaces[core.ProviderState{Provider: "ret", State: "paused"}]; got != 2 {
		t.Errorf("paused workspaces = %d, want 2 (%v)", got, s.Workspaces)
	}
	if s.StoredBytes["ret"] != 3*gib || s.ReclaimableBytes["ret"] != 0 || s.MonthlyCost["ret"] != 0 {
		t.Errorf("before a policy: stored %d, reclaimable %d, cost %v; want 3 GiB, 0, 0", s.StoredBytes["ret"], s.ReclaimableBytes["ret"], s.MonthlyCost["ret"])
	}
	if got := fmt.Sprint(s.PausedAge["ret"]); got != "[1 0 1 0 0]" {
		t.Errorf("paused ages = %s, want [1 0 1 0 0] (a day, a week, 30 days, 90 days, older)", got)
	}
	e.setPolicy(core.RetentionPolicy{Enabled: true, PausedFor: 30 * 24 * time.Hour, WarnBefore: time.Hour, StoragePricePerGiBMonth: &price})
	s = e.svc.MetricsSnapshot()
	if s.ReclaimableBytes["ret"] != 3*gib || s.MonthlyCost["ret"] != 1.5 {
		t.Errorf("with a policy: reclaimable %d, cost %v; want 3 GiB and 1.5", s.ReclaimableBytes["ret"], s.MonthlyCost["ret"])
	}
	if s.Shared || s.AccountLeases != 0 {
		t.Errorf("SQLite: shared %v, leases %d; want false, 0", s.Shared, s.AccountLeases)
	}
}

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu      sync.Mutex
	actions []string
}

func (r *recorder) Audited(e core.AuditEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.actions = append(r.actions, e.Action+" "+e.Outcome)
}
func (r *recorder) DeleteStep(string)          {}
func (r *recorder) Exported(core.ExportRecord) {}

// The observer hears every audited action as it is appended.
func TestObserverHearsAuditedActions(t *testing.T) {
	rec := &recorder{}
	e := newRetEnvObserved(t, rec)
	e.setPolicy(core.RetentionPolicy{Enabled: true, PausedFor: time.Hour, WarnBefore: time.Minute})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.actions) == 0 || rec.actions[len(rec.actions)-1][:len(core.AuditRetentionPolicy)] != core.AuditRetentionPolicy {
		t.Errorf("the observer heard %q, want a retention_policy entry last", rec.actions)
	}
}
