package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/canvasapp/companion/core"
)

// Domain registers a collector that reads snap (core.Service's
// MetricsSnapshot) at every scrape: the gauges of the domain's state are
// computed from it then, never kept in sync by hand.
func (m *Metrics) Domain(snap func() core.MetricsSnapshot) {
	m.reg.MustRegister(&domain{snap: snap})
}

var (
	descWorkspaces = prometheus.NewDesc("companion_workspaces",
		"Workspaces by provider and state.", []string{"provider", "state"}, nil)
	descStored = prometheus.NewDesc("companion_stored_bytes",
		"Sum of the workspaces' known sizes, by provider.", []string{"provider"}, nil)
	descReclaimable = prometheus.NewDesc("companion_reclaimable_bytes",
		"Sum of the known sizes of paused workspaces an enabled retention policy will delete, by provider.", []string{"provider"}, nil)
	descCost = prometheus.NewDesc("companion_reclaimable_cost_per_month",
		"What the reclaimable bytes cost per month at the accounts' storage prices (where set), by provider.", []string{"provider"}, nil)
	descPaused = prometheus.NewDesc("companion_paused_workspaces",
		"Paused workspaces by provider and how long they have been paused: age is the upper bound (1d, 7d, 30d, 90d, older).", []string{"provider", "age"}, nil)
	descAccounts = prometheus.NewDesc("companion_accounts",
		"Provider accounts by the reconciler's state (failing: backing off before the next list).", []string{"state"}, nil)
	descLeases = prometheus.NewDesc("companion_account_leases",
		"Provider accounts whose reconciler lease this replica holds (PostgreSQL replicas; 0 on SQLite).", nil, nil)
	descLeasesTaken = prometheus.NewDesc("companion_account_leases_taken_total",
		"Account leases this replica took that it did not hold before.", nil, nil)
	descTakeovers = prometheus.NewDesc("companion_takeovers_total",
		"Journal entries of another replica (one that stopped) this replica claimed and resumed.", nil, nil)
	descShared = prometheus.NewDesc("companion_store_shared",
		"1 when the store is shared by replicas (PostgreSQL), 0 otherwise.", nil, nil)
)

// ageLabels name core.PausedAgeBuckets, then the older ones.
var ageLabels = func() []string {
	out := make([]string, 0, len(core.PausedAgeBuckets)+1)
	for _, d := range core.PausedAgeBuckets {
		out = append(out, strconv.Itoa(int(d/(24*time.Hour)))+"d")
	}
	return append(out, "older")
}()

type domain struct{ snap func() core.MetricsSnapshot }

func (d *domain) Describe(ch chan<- *prometheus.Desc) {
	for _, x := range []*prometheus.Desc{descWorkspaces, descStored, descReclaimable, descCost, descPaused, descAccounts,
		descLeases, descLeasesTaken, descTakeovers, descShared} {
		ch <- x
	}
}

func (d *domain) Collect(ch chan<- prometheus.Metric) {
	s := d.snap()
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	for k, n := range s.Workspaces {
		gauge(descWorkspaces, float64(n), k.Provider, k.State)
	}
	for p, b := range s.StoredBytes {
		gauge(descStored, float64(b), p)
	}
	for p, b := range s.ReclaimableBytes {
		gauge(descReclaimable, float64(b), p)
	}
	for p, c := range s.MonthlyCost {
		gauge(descCost, c, p)
	}
	for p, buckets := range s.PausedAge {
		for i, n := range buckets {
			gauge(descPaused, float64(n), p, ageLabels[i])
		}
	}
	for st, n := range s.Accounts {
		gauge(descAccounts, float64(n), string(st))
	}
	gauge(descLeases, float64(s.AccountLeases))
	ch <- prometheus.MustNewConstMetric(descLeasesTaken, prometheus.CounterValue, float64(s.LeasesTaken))
	ch <- prometheus.MustNewConstMetric(descTakeovers, prometheus.CounterValue, float64(s.Takeovers))
	shared := 0.0
	if s.Shared {
		shared = 1
	}
	gauge(descShared, shared)
}

// StreamStats is the WebSocket stream's activity (uibridge's).
type StreamStats struct {
	// Clients are connected now; Opened since start, Messages sent to
	// them since start, Dropped closed as slow consumers since start.
	Clients                   int
	Opened, Messages, Dropped int64
}

var (
	descStreamClients  = prometheus.NewDesc("companion_stream_clients", "WebSocket stream clients connected now.", nil, nil)
	descStreamOpened   = prometheus.NewDesc("companion_stream_connections_total", "WebSocket stream connections opened.", nil, nil)
	descStreamMessages = prometheus.NewDesc("companion_stream_messages_total", "Messages sent to WebSocket stream clients.", nil, nil)
	descStreamDropped  = prometheus.NewDesc("companion_stream_slow_clients_total", "Stream clients closed because they fell too far behind.", nil, nil)
)

// Stream registers a collector that reads the stream's stats at every
// scrape; stats may be called before the stream exists (return zeros).
func (m *Metrics) Stream(stats func() StreamStats) {
	m.reg.MustRegister(&stream{stats: stats})
}

type stream struct{ stats func() StreamStats }

func (s *stream) Describe(ch chan<- *prometheus.Desc) {
	ch <- descStreamClients
	ch <- descStreamOpened
	ch <- descStreamMessages
	ch <- descStreamDropped
}

func (s *stream) Collect(ch chan<- prometheus.Metric) {
	st := s.stats()
	ch <- prometheus.MustNewConstMetric(descStreamClients, prometheus.GaugeValue, float64(st.Clients))
	ch <- prometheus.MustNewConstMetric(descStreamOpened, prometheus.CounterValue, float64(st.Opened))
	ch <- prometheus.MustNewConstMetric(descStreamMessages, prometheus.CounterValue, float64(st.Messages))
	ch <- prometheus.MustNewConstMetric(descStreamDropped, prometheus.CounterValue, float64(st.Dropped))
}
